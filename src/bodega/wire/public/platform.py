"""The platform and cluster routes on the wire: placements, regions, members, workers.

``POST /v1/platform/placements`` and ``GET /v1/platform/regions`` as the
Machines API shapes them (``main.getPlacementsResponse``, ``main.regionResponse``;
the regions answer's keys are capitalized, as flyctl reads them), and bodega's
``/v1/cluster/members`` and ``/v1/cluster/workers``. A simulated placement's
explanation is ``wire/public/placement.py``'s, the record a real one leaves.
"""

from __future__ import annotations

from bodega.model.answer import Answer
from bodega.model.rows import Free, HostTotals, HostUsage, WorkerRow
from bodega.wire.public.placement import RegionExplanation


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
    status: str = ""  # alive, suspect, dead or left; unknown: a worker it has no record of
    incarnation: int = 0
    generation: int = 0
    host: str = ""  # the registry agent that speaks for it in SWIM; empty: it speaks itself
    # ok, unreachable or unknown, by the rule every answer uses (broker/view/core/host_status.py)
    host_status: str | None = None
    since: str | None = None  # when its status last changed (RFC 3339), as the broker saw it


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
    cordon_reason: str | None = None  # ``draining`` while a drain moves its machines off
    reservations: int | None = None
    machines: int | None = None
    subnet: str | None = None  # its machines' /24, when other hosts route to it
    images: list[str] | None = None
    image_registry: str | None = None  # the image registry its host serves (host:port)
    updated_at: str | None = None
    status: str = "unknown"
    host: str | None = None  # the host it runs on (its registry agent), where it is known

    @classmethod
    def of(cls, row: WorkerRow, status: str) -> WorkerStatus:
        """The fields of ``row`` this answer shows, and membership's ``status``."""
        return cls.model_validate({**row.model_dump(include=set(cls.model_fields)),
                                   "status": status})
