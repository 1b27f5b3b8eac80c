"""What placement is asked to decide, and what it knows about each worker.

Both are plain values built by the broker from the registry view: placement
itself never reads anything, so the same request and candidates always rank
the same way (for a given random seed when sampling).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bodega.model.capacity import Ask, Totals, Usage
from bodega.model.rows import WorkerRow


@dataclass(frozen=True)
class Candidate:
    """One worker as the view last saw it. Stale is fine: the worker has the final word."""

    name: str
    region: str
    url: str
    totals: Totals
    used: Usage
    cordoned: bool = False
    cordon_reason: str = ""  # why, when cordoned with a reason (``draining``)
    status: str = "alive"  # membership: alive, suspect, dead, left
    images: frozenset[str] = frozenset()
    # Why it runs no image machine (a worker with the process driver only: no OCI runtime,
    # or no cgroups for one); "" when it runs them.
    images_off: str = ""

    @classmethod
    def from_view(cls, row: WorkerRow, status: str) -> Candidate:
        """From a ``workers`` row of the registry view (what a worker publishes)."""
        return cls(
            name=row.name, region=row.region, url=row.url,
            totals=Totals.from_row(row.totals), used=Usage.from_row(row.used),
            cordoned=row.cordoned, cordon_reason=row.cordon_reason or "", status=status,
            images=frozenset(row.images or ()), images_off=row.images_off or "",
        )


@dataclass(frozen=True)
class PlacementRequest:
    app: str
    ask: Ask
    regions: tuple[str, ...]  # in order of preference; the first that fits wins
    image: str | None = None
    needs_images: bool = False  # the image names a registry: only a worker running images
    pinned_worker: str | None = None  # the host of the volume the machine mounts
    pinned_reason: str = ""
    avoid: frozenset[str] = frozenset()  # workers that must not be chosen
    avoid_reason: str = "avoided"
    colocated: Mapping[str, int] = field(default_factory=dict)  # worker -> machines of this app
    standby_workers: frozenset[str] = frozenset()  # hosts of machines this one stands by for
