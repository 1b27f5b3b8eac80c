"""A machine's move on the wire: the broker's ask of the machine's worker, and the record
that worker hands to the target (``worker/ops/moves.py``, ``worker/core/moves.py``)."""

from __future__ import annotations

from pydantic import Field

from bodega.model.ids import MachineId, MachineName, VolumeId
from bodega.model.json import JsonObject
from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import WorkerAnswer, WorkerRequest

MOVE_WAIT = 120.0  # how long the machine's worker holds the call while the move runs


class MoveBody(WorkerRequest):
    """The broker to the machine's worker: move it to ``target``."""

    target: str = Field(min_length=1, max_length=128)
    target_url: str = Field(min_length=1, max_length=512)
    reason: str | None = Field(default=None, max_length=500)
    reservation_id: str | None = None  # room held for it on the target
    start: bool = False  # start it there even if it rests here (a start that found no room)


class MovedVersion(WorkerRequest):
    instance_id: str
    config: MachineConfig
    created_at: float


class MovedEntry(WorkerRequest):
    """One entry of the machine's history as its former worker logged it."""

    op_id: str
    fsm: str
    step: str
    payload: JsonObject  # as logged, read by nothing on the way
    event: JsonObject | None = None
    at: float


class MovedVolume(WorkerRequest):
    """The machine's volume, whose data the target received first (``import-volume``)."""

    id: VolumeId
    name: str
    size_gb: int = Field(ge=1)
    encrypted: bool = True
    fstype: str = "ext4"
    snapshot_retention: int = 5
    auto_backup_enabled: bool = True
    created_at: float
    digest: str  # of its data, as the source holds it (``volume_copy.tree_digest``)


class LiveArrival(WorkerRequest):
    """A running VM that moves live: what the target's qemu must match to take its state."""

    mac: str = Field(pattern=r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
    disk_bytes: int = Field(ge=1)  # its root disk's virtual size


class ImportMachineBody(WorkerRequest):
    """The machine's worker to the target: the record, its versions and its history."""

    move_id: str = Field(min_length=1, max_length=64)
    source: str = Field(min_length=1, max_length=128)
    generation: int = Field(ge=1)
    start: bool = False  # it was running: start it there
    reason: str | None = Field(default=None, max_length=500)
    reservation_id: str | None = None
    id: MachineId
    app: str = Field(min_length=1, max_length=63)
    name: MachineName
    instance_id: str
    config: MachineConfig
    cordoned: bool = False
    start_seq: int = 0
    restarts: int = 0
    placement: str | None = None  # the placement record, JSON text as stored
    idempotency_key: str | None = None
    created_at: float
    updated_at: float
    versions: list[MovedVersion] = Field(default_factory=list)
    history: list[MovedEntry] = Field(default_factory=list)
    volume: MovedVolume | None = None
    live: LiveArrival | None = None  # it moves live: started waiting for its state


class MoveDone(WorkerAnswer):
    """The machine's former worker's answer: the move ended, the machine is on ``worker``."""

    worker: str


class VolumeReceived(WorkerAnswer):
    """The target's answer to a volume's data: its digest as unpacked there."""

    digest: str
    size: int = 0


class LiveTaken(WorkerAnswer):
    """The target's answer to a live move's stream: how its qemu's migration ended."""

    status: str
    total_ms: int | None = None


class LiveSwitched(WorkerAnswer):
    """The target's answer to a live move's last call: how the VM goes on there."""

    migrated: str  # "live": its memory with it; "cold": booted afresh
