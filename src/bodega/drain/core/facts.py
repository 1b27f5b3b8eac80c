"""What a drain or a rebalance plans from: each worker's room and standing, each machine's
size, state and health, each app's floor. Plain values, built from the API's answers
(``WorkerStatus``, ``Machine``) by ``fleet_of``, so the planners never read anything.

A machine's ``ask`` is what it holds of a host while it runs (``Ask.for_config``), with
its volume's disk when it mounts one (a move brings the volume). A stopped machine holds
no compute: it is planned where it *could* start, and counts against no worker's room.
An app's ``keep`` is the most ``min_machines_running`` any of its machines' services
asks for (the proxy keeps that many running; a drain never takes it below).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from bodega.model.capacity import Ask, Totals, Usage
from bodega.model.machine import Machine, names_registry
from bodega.placement.request import Candidate
from bodega.wire.public.platform import WorkerStatus

STARTED = "started"
# States a machine is moved in: at rest or running. One being created, stopped, replaced or
# destroyed is left to finish first (the drain says so).
MOVABLE = frozenset({"started", "stopped", "suspended"})
HEALTHY_CHECK = "passing"


@dataclass(frozen=True)
class Unit:
    """One machine as the planners see it."""

    id: str
    app: str
    worker: str
    region: str
    state: str
    ask: Ask
    healthy: bool  # started, and every check it has passes
    needs_images: bool = False
    standby_for: tuple[str, ...] = ()  # the machines it stands by for
    name: str = ""
    volume: str | None = None  # the volume it mounts: a move copies its data along

    @property
    def started(self) -> bool:
        return self.state == STARTED

    @property
    def label(self) -> str:
        return f"{self.app}/{self.id}"


@dataclass(frozen=True)
class Fleet:
    """The workers (as placement's candidates), the machines, and each app's floor."""

    workers: tuple[Candidate, ...]
    units: tuple[Unit, ...]
    keep: Mapping[str, int] = field(default_factory=dict)  # app -> min_machines_running

    def worker(self, name: str) -> Candidate | None:
        return next((w for w in self.workers if w.name == name), None)

    def of_app(self, app: str) -> list[Unit]:
        return [u for u in self.units if u.app == app]


def candidate_of(status: WorkerStatus) -> Candidate:
    """A worker's answer as placement's candidate (its filters give the refusals)."""
    totals = Totals.from_row(status.totals) if status.totals else Totals(cpus=0, memory_mb=0)
    used = Usage.from_row(status.used) if status.used else Usage()
    return Candidate(name=status.name, region=status.region or "", url=status.url or "",
                     totals=totals, used=used, cordoned=bool(status.cordoned),
                     cordon_reason=status.cordon_reason or "", status=status.status,
                     images=frozenset(status.images or ()))


def unit_of(machine: Machine) -> Unit | None:
    """A machine as a planner's unit; None for one with no worker or config known."""
    config = machine.known_config()
    if config is None or not machine.worker or not machine.app:
        return None
    ask = Ask.for_config(config)
    if config.mounts and config.mounts[0].size_gb:
        ask = replace(ask, disk_gb=config.mounts[0].size_gb)
    checks = machine.checks or []
    healthy = machine.state == STARTED and all(c.status == HEALTHY_CHECK for c in checks)
    return Unit(id=machine.id, app=machine.app, worker=machine.worker, region=machine.region,
                state=machine.state, ask=ask, healthy=healthy,
                needs_images=bool(config.image and names_registry(config.image)),
                standby_for=machine.standbys(), name=machine.name,
                volume=config.mounts[0].volume if config.mounts else None)


def keep_of(machines: Iterable[Machine]) -> dict[str, int]:
    """Each app's ``min_machines_running``: the most any of its services asks for."""
    keep: dict[str, int] = {}
    for machine in machines:
        config = machine.known_config()
        if config is None or not machine.app:
            continue
        wanted = max((s.min_machines_running or 0 for s in config.services or ()), default=0)
        keep[machine.app] = max(keep.get(machine.app, 0), wanted)
    return keep


def fleet_of(workers: Sequence[WorkerStatus], machines: Sequence[Machine]) -> Fleet:
    """The planners' facts from ``/v1/cluster/hosts`` and every app's machines."""
    units = tuple(u for m in machines if m.state != "destroyed" and (u := unit_of(m)))
    return Fleet(workers=tuple(candidate_of(w) for w in workers), units=units,
                 keep=keep_of(machines))


def named(workers: Sequence[WorkerStatus], name: str) -> list[WorkerStatus]:
    """The worker ``name``, or else every worker of host ``name`` (as the broker's drain
    route chooses them)."""
    return [w for w in workers if w.name == name] or [w for w in workers if w.host == name]
