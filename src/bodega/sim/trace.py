"""What a simulation replays: machines arriving at a time, each living for a while, and
hosts dying and coming back.

A trace is a list of ``Arrival`` values sorted by time, and the ``Outage``
of hosts. The generator (``workload``) and the public-trace loader
(``google``) both produce it, so every policy is compared on exactly the
same arrivals and the same deaths. Times are seconds from the start of the
trace; a machine runs for ``lifetime`` once its create is done (a create
takes time: ``SimConfig``'s start and pull times).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from bodega.model.capacity import Ask


class Arrival(BaseModel):
    """One create: what it asks for, where, for how long, and whether it has a standby."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: float = Field(ge=0)
    app: str
    region: str
    cpu_kind: str = "shared"
    cpus: int = Field(ge=0)
    memory_mb: int = Field(ge=0)
    lifetime: float = Field(gt=0)
    standby: bool = False  # also create a stopped standby on another host

    def ask(self) -> Ask:
        return Ask(cpu_kind=self.cpu_kind, cpus=self.cpus, memory_mb=self.memory_mb)


class Outage(BaseModel):
    """A host dies at ``time``, losing every machine on it, and is back, empty, ``duration``
    seconds later (a repaired or replaced host)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: float = Field(ge=0)
    host: str
    duration: float = Field(gt=0)


class Trace(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    arrivals: tuple[Arrival, ...]
    outages: tuple[Outage, ...] = ()

    @classmethod
    def of(cls, name: str, arrivals: Iterable[Arrival],
           outages: Iterable[Outage] = ()) -> Trace:
        return cls(name=name, arrivals=tuple(sorted(arrivals, key=lambda a: (a.time, a.app))),
                   outages=tuple(sorted(outages, key=lambda o: (o.time, o.host))))

    @property
    def end(self) -> float:
        """When the last machine has arrived."""
        return self.arrivals[-1].time if self.arrivals else 0.0

    def regions(self) -> list[str]:
        return sorted({a.region for a in self.arrivals})
