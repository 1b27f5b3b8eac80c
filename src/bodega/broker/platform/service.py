"""Platform endpoints: simulate placements, capacity per region, the cluster's members.

``POST /v1/platform/placements`` runs the same pipeline as a create on a
scratch copy of the view, reserving nothing: it places ``count`` machines one
after another (each counted against the worker it landed on) and reports,
per region, how many fit and on how many distinct hosts.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import replace

from bodega.broker.machines.service import Machines
from bodega.broker.placing.core.record import explained
from bodega.broker.view.candidates import Candidates
from bodega.broker.view.catalog import Catalog
from bodega.broker.view.core.host_status import listed_members
from bodega.model.capacity import Ask, shortfalls
from bodega.model.errors import BadRequest
from bodega.model.image_registries import Advertised, push_order
from bodega.model.machine import names_registry
from bodega.model.machine_config import Guest, preset
from bodega.model.rows import WorkerRow
from bodega.placement import CandidateTable, PlacementRequest, Policy, rank_region
from bodega.placement.regions import GEO
from bodega.wire.public.cluster_info import ClusterInfo
from bodega.wire.public.fly import PlacementsRequest
from bodega.wire.public.placement import RegionExplanation
from bodega.wire.public.platform import (
    Member,
    Placements,
    Region,
    RegionPlacement,
    Regions,
    WorkerStatus,
)

# Name, latitude, longitude of the regions bodega knows by code (Fly's), for /platform/regions.
REGION_INFO: dict[str, tuple[str, float, float]] = {
    "ams": ("Amsterdam, Netherlands", 52.37, 4.90), "fra": ("Frankfurt, Germany", 50.11, 8.68),
    "lhr": ("London, United Kingdom", 51.51, -0.13), "cdg": ("Paris, France", 48.86, 2.35),
    "syd": ("Sydney, Australia", -33.87, 151.21), "nrt": ("Tokyo, Japan", 35.68, 139.77),
    "sin": ("Singapore", 1.35, 103.82), "iad": ("Ashburn, Virginia (US)", 39.04, -77.49),
    "ord": ("Chicago, Illinois (US)", 41.88, -87.63), "sjc": ("San Jose, California (US)",
                                                              37.34, -121.89),
    "gru": ("Sao Paulo, Brazil", -23.55, -46.63), "jnb": ("Johannesburg, South Africa",
                                                          -26.20, 28.05),
}
DEFAULT_SIZE = "performance-1x"
MOST_PER_HOST = 10_000  # what "fits" reports for an ask of nothing


def ask_for(guest: Guest | None) -> Ask:
    if guest is None:
        kind, cpus, memory = preset(DEFAULT_SIZE)
        return Ask(cpu_kind=kind, cpus=cpus, memory_mb=memory)
    return Ask(cpu_kind=guest.cpu_kind, cpus=guest.cpus, memory_mb=guest.memory_mb,
               gpus=guest.gpus or 0, gpu_kind=guest.gpu_kind,
               isolation=guest.runs_in)


LIVE = ("alive", "suspect")  # members whose registries a push goes to


class Platform:
    def __init__(self, catalog: Catalog, candidates: Candidates, machines: Machines,
                 policy: Policy, nearest: str) -> None:
        self.catalog = catalog
        self.candidates = candidates
        self.machines = machines
        self.policy = policy
        self.nearest = nearest

    def placements(self, body: PlacementsRequest) -> Placements:
        ask = ask_for(body.compute)
        if body.volume_size_bytes:
            ask = replace(ask, disk_gb=math.ceil(body.volume_size_bytes / (1 << 30)))
        regions = self.candidates.asked(body.region, f"{self.nearest},any")
        policy = self.policy
        if body.weights:
            try:
                scorer = policy.scorer.reweighted({k: float(v) for k, v in body.weights.items()})
            except ValueError as exc:
                raise BadRequest(f"invalid_argument: {exc}") from None
            policy = replace(policy, scorer=scorer)
        colocated: Mapping[str, int] = {}
        if body.app:
            self.machines.apps.require(body.app)
            colocated = self.machines.workers.index.colocated(body.app)
        request = PlacementRequest(app=body.app or "", ask=ask, regions=regions,
                                   image=body.image,
                                   needs_images=bool(body.image and names_registry(body.image)),
                                   colocated=colocated)
        out: list[RegionPlacement] = []
        explain: list[RegionExplanation] = []
        remaining = body.count
        for region in regions:
            table = self.candidates.table(region)
            if body.count == 0:
                fit, hosts = self._capacity(table, ask)
                out.append(RegionPlacement(region=region, count=fit, concurrency=hosts))
                if body.explain:
                    explain.append(explained(rank_region(request, table, policy)))
                continue
            if remaining <= 0:
                break
            placed, hosts, first = self._simulate(request, table, policy, remaining)
            if body.explain and first is not None:
                explain.append(first)
            if placed:
                out.append(RegionPlacement(region=region, count=placed, concurrency=hosts))
                remaining -= placed
        return Placements(regions=out, explain=explain if body.explain else None)

    def _simulate(self, request: PlacementRequest, table: CandidateTable, policy: Policy,
                  count: int) -> tuple[int, int, RegionExplanation | None]:
        scratch = CandidateTable(table.region, list(table))
        rng = random.Random(0)
        hosts: set[str] = set()
        first: RegionExplanation | None = None
        colocated = dict(request.colocated)
        for placed in range(count):
            ranking = rank_region(replace(request, colocated=dict(colocated)), scratch, policy,
                                  rng)
            best = next(ranking.attempts(), None)
            if first is None:
                first = explained(ranking)
            if best is None:
                return placed, len(hosts), first
            worker = best.candidate
            hosts.add(worker.name)
            colocated[worker.name] = colocated.get(worker.name, 0) + 1
            scratch.put(replace(worker, used=worker.used.plus(worker.totals, request.ask)))
        return count, len(hosts), first

    @staticmethod
    def _capacity(table: CandidateTable, ask: Ask) -> tuple[int, int]:
        """How many more machines of ``ask`` fit in the region, and on how many hosts."""
        total = hosts = 0
        for worker in table:
            if worker.status != "alive" or worker.cordoned:
                continue
            totals, used = worker.totals, worker.used
            if shortfalls(totals, used, ask):
                continue
            limits = [MOST_PER_HOST]
            for need, free in ((totals.millicpus_for(ask), totals.millicpus - used.millicpus),
                               (ask.memory_mb, totals.memory_mb - used.memory_mb),
                               (ask.disk_gb, totals.disk_gb - used.disk_gb)):
                if need > 0:
                    limits.append(free // need)
            fit = min(limits)
            total += fit
            hosts += 1
        return total, hosts

    def regions(self, ask: Ask) -> Regions:
        rows = []
        for code in self.candidates.regions():
            fit, _ = self._capacity(self.candidates.table(code), ask)
            name, lat, lon = REGION_INFO.get(code, (code, 0.0, 0.0))
            rows.append(Region(code=code, name=name, latitude=lat, longitude=lon,
                               gateway_available=True, requires_paid_plan=False,
                               geo_region=GEO.get(code, ""), capacity=fit))
        return Regions(Regions=rows, Nearest=self.nearest)

    def members(self) -> list[Member]:
        """Membership's members, and the workers it has no record of whose rows remain."""
        return listed_members(self.catalog.members(), self.catalog.rows(WorkerRow))

    def about(self, given: ClusterInfo) -> ClusterInfo:
        """``given`` (what this broker was started with) and every live image registry the
        workers advertise, this broker's own first: where a push goes."""
        advertised = [Advertised(row.image_registry,
                                 self.catalog.member_status(row.name) in LIVE)
                      for row in self.catalog.rows(WorkerRow) if row.image_registry]
        registries = push_order(given.image_registry, advertised)
        if not registries:
            return given
        return given.model_copy(update={"image_registry": registries[0],
                                        "image_registries": registries})

    def workers(self) -> list[WorkerStatus]:
        return [WorkerStatus.of(row, self.catalog.member_status(row.name) or "unknown")
                for row in sorted(self.catalog.rows(WorkerRow), key=lambda r: r.name)]
