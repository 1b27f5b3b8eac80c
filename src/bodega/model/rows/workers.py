"""The ``workers`` row: what a worker publishes of itself, read by everyone who places,
routes, peers or shows workers.

One model, built by the worker's publisher and read by the broker (candidates, the
dashboard, ``/platform`` workers and members), the proxy, the worker's jobs and the
private network (overlay peers, routes to other hosts' machine subnets). It reads as
every answer does (``model/answer.py``): fields it does not know are ignored, since a
peer of a newer version may add a column and the registry hands the row on whole
(its document, not this model, is what is stored and gossiped), so an older reader
loses nothing it could have used. The fields a worker of an older version may lack
have defaults.
"""

from __future__ import annotations

from typing import ClassVar

from bodega.model.answer import Answer
from bodega.model.rows.row import Row

# The cordon reason a drain gives a worker: placement's refusal and the dashboard say it.
DRAINING = "draining"


class HostTotals(Answer):
    """A host's configured limits (``model.capacity.Totals`` on the wire)."""

    cpus: int
    memory_mb: int
    disk_gb: int = 0
    gpus: dict[str, int] = {}
    shared_cpu_ratio: float = 4.0
    cpu_kinds: list[str] = []
    isolations: list[str] = []  # those the worker ran at its start (docs/isolation.md)
    vm_accel: str = ""  # how its vm isolation runs: kvm, or tcg (qemu's emulation)


class HostUsage(Answer):
    """What is committed on a host (``model.capacity.Usage`` on the wire)."""

    millicpus: int = 0
    memory_mb: int = 0
    disk_gb: int = 0
    gpus: dict[str, int] = {}


class Free(Answer):
    """What a host has free: what a refusal names, and what its capacity shows."""

    millicpus: int
    cpus: float
    memory_mb: int
    disk_gb: int
    gpus: dict[str, int] = {}
    summary: str = ""


class OverlayAdvert(Answer):
    """A host's WireGuard overlay as its row advertises it, for other hosts to peer with
    (``networking/core/peers.py`` checks it is whole and well formed before using it)."""

    public_key: str = ""
    endpoint: str = ""  # host:port ([v6]:port)
    block: str = ""  # the host's /64
    interface: str = ""


class WorkerRow(Row):
    """A worker's row in the view, keyed by its name."""

    TABLE: ClassVar[str] = "workers"

    name: str
    region: str
    url: str
    jobs_url: str | None = None  # its jobs door (worker/jobs/door.py); None: it has none
    driver: str = ""
    totals: HostTotals
    used: HostUsage = HostUsage()
    free: Free | None = None
    cordoned: bool = False
    cordon_reason: str | None = None  # why it is cordoned: ``draining`` while a drain runs
    reservations: int = 0  # live reservations
    machines: int = 0  # live machines
    subnet: str | None = None  # its machines' /24, when other hosts may route to it
    images_off: str | None = None  # why it runs no image machine; None when it does
    images: list[str] | None = None  # the images it holds, for placement's image bonus
    image_disk_gb: int | None = None  # their disk, counted in used
    wireguard: OverlayAdvert | None = None  # its private network's overlay
    # The image registry its host serves (host:port), for every host to pull from and
    # deploys to push to (model/image_registries.py); None: its host serves none.
    image_registry: str | None = None
    updated_at: str | None = None  # when it was published (RFC 3339)
