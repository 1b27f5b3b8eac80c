"""The platform and cluster routes on the wire: placements, regions, members, workers.

``POST /v1/platform/placements`` and ``GET /v1/platform/regions`` as the
Machines API shapes them (``main.getPlacementsResponse``, ``main.regionResponse``;
the regions answer's keys are capitalized, as flyctl reads them), and bodega's
``/v1/cluster/members`` and ``/v1/cluster/workers``; and the explanation of a
placement (``PlacementRecord``, each region's ranking as ``placement/rank.py``
explains it), which the CLI shows.
"""

from __future__ import annotations

from bodega.model.answer import Answer
from bodega.wire.worker_calls import Free, HostTotals, HostUsage


class Refusal(Answer):
    worker: str
    reason: str = ""


class Ranked(Answer):
    worker: str
    score: float
    subscores: dict[str, float] = {}


class RegionExplanation(Answer):
    """One region's ranking of a request, as the placement pipeline explains it."""

    region: str
    candidates: int = 0
    feasible: int = 0
    refused: dict[str, int] = {}  # refusals counted by kind
    refusals: list[Refusal] = []  # the first few, by name, with their reason
    ranked: list[Ranked] = []  # the top few, with their subscores
    sampled: int | None = None  # d, when the ranking sampled (power of d choices)


class Asked(Answer):
    """What a placement asked for (``model.capacity.Ask`` on the wire)."""

    cpu_kind: str = "shared"
    cpus: int = 0
    memory_mb: int = 0
    disk_gb: int = 0
    gpus: int = 0
    gpu_kind: str | None = None


class PlacementAttempt(Answer):
    worker: str
    region: str
    outcome: str  # accepted, rejected, unreachable
    ms: float | None = None
    reason: str | None = None


class Winner(Ranked):
    region: str = ""


class PlacementRecord(Answer):
    """Why a machine is where it is (``GET .../placement``): the record its placement left
    (``broker/placing/record.py``), kept by the worker with the machine."""

    policy: str = ""
    asked: Asked = Asked()
    regions_asked: list[str] = []
    broker: str = ""
    at: str = ""
    duration_ms: float = 0.0
    regions: list[RegionExplanation] = []
    attempts: list[PlacementAttempt] = []
    winner: Winner | None = None


class RegionPlacement(Answer):
    region: str
    count: int
    concurrency: int  # on how many distinct hosts


class Placements(Answer):
    regions: list[RegionPlacement] = []
    explain: list[RegionExplanation] | None = None  # bodega's: each region's ranking


class Region(Answer):
    code: str
    name: str = ""
    latitude: float = 0.0
    longitude: float = 0.0
    gateway_available: bool = True
    requires_paid_plan: bool = False
    geo_region: str = ""
    capacity: int = 0  # how many more machines of the size asked fit


class Regions(Answer):
    Regions: list[Region] = []
    Nearest: str = ""


class Member(Answer):
    """A member of the cluster as SWIM sees it (``registry``'s ``MemberView``)."""

    name: str
    addr: str = ""
    role: str = ""
    region: str = ""
    meta: dict[str, str] = {}
    status: str = ""  # alive, suspect, dead or left
    incarnation: int = 0
    generation: int = 0


class WorkerStatus(Answer):
    """A worker's row in the view (what it publishes of its capacity), with its member status."""

    name: str
    region: str | None = None
    url: str | None = None
    driver: str | None = None
    totals: HostTotals | None = None
    used: HostUsage | None = None
    free: Free | None = None
    cordoned: bool | None = None
    reservations: int | None = None
    machines: int | None = None
    subnet: str | None = None  # its machines' /24, when other hosts route to it
    images: list[str] | None = None
    updated_at: str | None = None
    status: str = "unknown"
