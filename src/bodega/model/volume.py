"""The Volume object, in the Fly Machines API's shape, plus the fields a worker adds.

Built by the worker's renderer, published as the volume's registry row, read by the
broker and answered to its clients without the internal fields (``app``, ``worker``).
Every field of the API's ``Volume`` is here; those bodega does not fill (block counts,
``attached_alloc_id``, ``type``) read ``None`` and are left out when encoded.
"""

from __future__ import annotations

from typing import ClassVar

from bodega.model.answer import Answer
from bodega.model.rows.row import Row

# updated_at is not a field of the API's Volume (only of OrgVolume, which adds it back).
INTERNAL_FIELDS = frozenset({"app", "worker", "updated_at", "generation"})


class Volume(Row):
    TABLE: ClassVar[str] = "volumes"  # its registry row, as its worker publishes it

    id: str = ""
    name: str = ""
    state: str = ""
    size_gb: int = 0
    region: str = ""
    zone: str = ""
    encrypted: bool = False
    created_at: str = ""
    updated_at: str | None = None  # internal: when its worker last changed it
    fstype: str = ""
    snapshot_retention: int | None = None
    auto_backup_enabled: bool | None = None
    host_status: str | None = None  # ok, unknown or unreachable
    app: str | None = None  # internal: the app it belongs to
    worker: str | None = None  # internal: the worker whose disk holds it
    attached_machine_id: str | None = None
    attached_alloc_id: str | None = None
    block_size: int | None = None
    blocks: int | None = None
    blocks_avail: int | None = None
    blocks_free: int | None = None
    bytes_total: int | None = None
    bytes_used: int | None = None
    type: str | None = None  # local or cache
    generation: int | None = None  # internal: its moves so far (the newest owner's row wins)

    def public(self) -> Volume:
        """The volume as the broker's clients are shown it: without its internal fields."""
        return self.model_copy(update=dict.fromkeys(INTERNAL_FIELDS))


class ExtendVolumeAnswer(Answer):
    volume: Volume
    needs_restart: bool = False


class VolumeSnapshot(Answer):
    """A copy of a volume's data, kept on its volume's host and another for ``retention_days``."""

    id: str = ""
    created_at: str = ""
    digest: str = ""  # sha256 over the copy's paths, modes and contents
    retention_days: int = 0
    size: int = 0  # bytes of data in the copy
    status: str = ""  # created; creating while it is taken
    volume_size: int = 0  # GB of the volume it was taken of: a restore needs at least this
    # bodega's: the workers holding the snapshot, the one that took it first, and whether
    # one of them is another than that one (docs/volumes.md): until it is, the snapshot
    # is local-only and goes with its host.
    holders: list[str] | None = None
    off_host: bool | None = None
