"""The simulated hosts: regions of workers of different sizes, and what each holds.

A ``SimHost`` is the worker's own ledger in miniature: the truth a broker's
view lags behind. ``admits`` is the worker's final word, the same
``model.capacity.fits`` check its ledger runs, so a broker acting on a stale
view is told no exactly when a real worker would say no.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from bodega.model.capacity import Ask, Totals, Usage, fits
from bodega.placement import Candidate


class HostShape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: int = Field(gt=0)
    memory_mb: int = Field(gt=0)
    count: int = Field(gt=0)
    shared_cpu_ratio: float = Field(default=4.0, gt=0)


class RegionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    hosts: tuple[HostShape, ...]


class FleetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    regions: tuple[RegionSpec, ...]

    def scaled(self, factor: float) -> FleetSpec:
        """The same mix of sizes with ``factor`` times as many hosts (at least one of each)."""
        return FleetSpec(regions=tuple(
            RegionSpec(name=r.name, hosts=tuple(
                h.model_copy(update={"count": max(1, round(h.count * factor))}) for h in r.hosts))
            for r in self.regions))


# Two regions of mixed hardware generations: many mid-size hosts, a few big ones, some small.
DEFAULT_FLEET = FleetSpec(regions=tuple(
    RegionSpec(name=name, hosts=(
        HostShape(cpus=8, memory_mb=32768, count=8),
        HostShape(cpus=16, memory_mb=65536, count=16),
        HostShape(cpus=32, memory_mb=131072, count=8),
        HostShape(cpus=64, memory_mb=262144, count=2),
    )) for name in ("ams", "iad")))


@dataclass
class Placed:
    app: str
    ask: Ask
    host: int
    end: float  # when it leaves: arrival, create time and lifetime
    standby: int | None = None  # the host of its standby, if it has one


@dataclass
class SimHost:
    name: str
    region: str
    totals: Totals
    used: Usage = field(default_factory=Usage)
    machines: set[int] = field(default_factory=set)
    unprotected: int = 0  # machines here with no standby on another host
    version: int = 0  # bumped at every change, as a worker's republished row would be
    alive: bool = True
    images: frozenset[str] = frozenset()  # images pulled here (the app's, one per app)

    def admits(self, ask: Ask) -> bool:
        """The worker's answer to a create; a dead host gives none."""
        return self.alive and fits(self.totals, self.used, ask)

    def take(self, machine: int, ask: Ask) -> None:
        self.used = self.used.plus(self.totals, ask)
        self.machines.add(machine)
        self.unprotected += 1  # until a standby elsewhere is placed for it
        self.version += 1

    def pull(self, image: str) -> bool:
        """Cache ``image`` here; whether it had to be pulled."""
        if image in self.images:
            return False
        self.images = self.images | {image}
        return True

    def die(self) -> set[int]:
        """The host is lost with everything on it; returns the machines it took down. It
        comes back (``revive``) empty: no machines, no images."""
        lost = self.machines
        self.alive, self.machines, self.used, self.unprotected = False, set(), Usage(), 0
        self.images = frozenset()
        self.version += 1
        return lost

    def revive(self) -> None:
        self.alive = True
        self.version += 1

    def give_back(self, machine: int, ask: Ask) -> None:
        self.used = self.used.minus(self.totals, ask)
        self.machines.discard(machine)
        self.version += 1

    def utilization(self) -> float:
        """The busier of cpu and memory, as a fraction of the host."""
        return host_utilization(self.totals, self.used)

    def candidate(self, used: Usage | None = None, status: str | None = None,
                  images: frozenset[str] | None = None) -> Candidate:
        """The host's row: as it is now, or with what a broker believes of it."""
        return Candidate(self.name, self.region, f"sim://{self.name}", self.totals,
                         self.used if used is None else used,
                         status=status or ("alive" if self.alive else "dead"),
                         images=self.images if images is None else images)


def host_utilization(totals: Totals, used: Usage) -> float:
    """A host's utilization: the busier of cpu and memory, as a fraction of the host (0 for
    a host with none of either). The simulator samples it; ``bodega cluster rebalance``
    scores a live fleet with it."""
    cpu = used.millicpus / totals.millicpus if totals.millicpus else 0.0
    memory = used.memory_mb / totals.memory_mb if totals.memory_mb else 0.0
    return max(cpu, memory)


def build_hosts(spec: FleetSpec) -> list[SimHost]:
    hosts: list[SimHost] = []
    for region in spec.regions:
        n = 0
        for shape in region.hosts:
            for _ in range(shape.count):
                n += 1
                hosts.append(SimHost(
                    f"{region.name}-{n:03d}", region.name,
                    Totals(cpus=shape.cpus, memory_mb=shape.memory_mb,
                           shared_cpu_ratio=shape.shared_cpu_ratio)))
    return hosts
