"""The worker's internal API on the wire: what brokers, proxies and tests send, and what comes back.

Requests forbid unknown fields: a misspelled one is a 400 that names it, never a
field silently dropped, because the worker and its callers ship together and a
field the worker does not know is a bug. Answers ignore unknown fields, so a
caller keeps reading a newer worker's answers while a cluster is upgraded.
"""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from bodega.model.answer import Answer
from bodega.model.capacity import Ask
from bodega.model.ids import MachineId, MachineName, SnapshotId, VolumeId
from bodega.model.machine_config import MachineConfig
from bodega.model.rows import Free, HostTotals, HostUsage
from bodega.wire.public.placement import PlacementRecord

OWNER_HEADER = "x-bodega-owner"  # the token that asked, kept as a machine's or a lease's owner


class WorkerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkerAnswer(Answer):
    """What a worker answers besides its resources (``model/``): frozen, and ignoring the
    fields a newer worker adds (``model/answer.py``)."""


# -- requests -----------------------------------------------------------------------------
class ReserveBody(WorkerRequest):
    app: str = Field(min_length=1, max_length=63)
    cpu_kind: str = "shared"
    cpus: int = Field(default=1, ge=0, le=64)
    memory_mb: int = Field(default=256, ge=0)
    disk_gb: int = Field(default=0, ge=0)
    gpus: int = Field(default=0, ge=0)
    gpu_kind: str | None = None
    ttl: float | None = Field(default=None, gt=0, le=300)  # None: the worker's default

    @classmethod
    def of(cls, app: str, ask: Ask, ttl: float | None) -> ReserveBody:
        return cls(app=app, cpu_kind=ask.cpu_kind, cpus=ask.cpus, memory_mb=ask.memory_mb,
                   disk_gb=ask.disk_gb, gpus=ask.gpus, gpu_kind=ask.gpu_kind, ttl=ttl)

    def ask(self) -> Ask:
        return Ask(cpu_kind=self.cpu_kind, cpus=self.cpus, memory_mb=self.memory_mb,
                   disk_gb=self.disk_gb, gpus=self.gpus, gpu_kind=self.gpu_kind)


class CreateMachineBody(WorkerRequest):
    """A create, from the broker (or a test) to one worker; the worker adds its region and
    the owner (``OWNER_HEADER``) and acts on every field here."""

    app: str = Field(min_length=1, max_length=63)
    config: MachineConfig
    name: MachineName | None = None
    generated_name: bool = False  # the caller made the name up: pick another if it is taken
    machine_id: MachineId | None = None
    reservation_id: str | None = None
    skip_launch: bool = False
    skip_service_registration: bool = False
    lease_ttl: int | None = Field(default=None, ge=1, le=3600)
    idempotency_key: str | None = Field(default=None, max_length=128)
    # The broker's placement record, kept with the machine and shown (GET .../placement).
    placement: PlacementRecord | None = None


class UpdateMachineBody(WorkerRequest):
    config: MachineConfig
    current_version: str | None = None
    skip_launch: bool = False
    name: str | None = None
    region: str | None = None


class StopBody(WorkerRequest):
    signal: str | int | None = None
    timeout: str | int | float | None = None


class SignalBody(WorkerRequest):
    signal: str | int | None = None


# What a worker may take beyond an exec's timeout to answer it: a vm machine's init may
# still be booting, and the answer has to come through the VM's port.
EXEC_SLACK = 30.0


class ExecBody(WorkerRequest):
    command: list[str] | None = None
    cmd: str | None = None
    timeout: int = Field(default=30, ge=1, le=600)
    stdin: str | None = None
    container: str | None = None


class LeaseBody(WorkerRequest):
    ttl: int | None = Field(default=None, ge=1, le=3600)
    description: str = Field(default="", max_length=256)


class MetadataBody(WorkerRequest):
    metadata: dict[str, str | None] = Field(default_factory=dict)
    machine_version: str | None = None


class MetadataValueBody(WorkerRequest):
    value: str


class CreateVolumeBody(WorkerRequest):
    app: str = Field(min_length=1, max_length=63)
    name: str
    size_gb: int = 1
    encrypted: bool = True
    fstype: str = "ext4"
    snapshot_retention: int = 5
    auto_backup_enabled: bool = True
    require_unique_zone: bool = True
    snapshot_id: str | None = None  # start as a copy of this snapshot
    # The workers holding it, for a worker that does not: it fetches it from one first.
    snapshot_holders: list[str] = []
    # The id to make it under (the broker picks one per create): a create asked again, its
    # answer lost, returns the volume the first ask made instead of making a second one.
    volume_id: VolumeId | None = None


class UpdateVolumeBody(WorkerRequest):
    snapshot_retention: int | None = None
    auto_backup_enabled: bool | None = None


class ExtendVolumeBody(WorkerRequest):
    size_gb: int


class SetMemoryBody(WorkerRequest):
    limit_mb: int | None = None


class ReclaimMemoryBody(WorkerRequest):
    amount_mb: int | None = None


# -- answers ------------------------------------------------------------------------------
class Health(WorkerAnswer):
    ok: bool
    name: str
    region: str


class Reservation(WorkerAnswer):
    id: str
    expires_at: float
    worker: str


class Released(WorkerAnswer):
    ok: bool
    released: bool


class Done(WorkerAnswer):
    """The answer of a call that only says it was done (stop, destroy, signal, cordon)."""

    ok: bool


class Cordoned(Done):
    cordoned: bool
    cordon_reason: str | None = None


class CordonBody(WorkerRequest):
    """``POST /v1/cordon``'s optional body: why (``draining``: a drain is moving the host's
    machines off, and placement's refusals say so)."""

    reason: str | None = Field(default=None, max_length=64)


class Started(WorkerAnswer):
    previous_state: str
    migrated: bool = False
    new_host: str = ""


class WorkerInfo(WorkerAnswer):
    """Who a worker is (``GET /v1/info``): its name, region, driver, URL, limits, pid."""

    name: str
    region: str
    driver: str
    url: str | None = None  # None until it serves
    totals: HostTotals
    pid: int


class Capacity(WorkerAnswer):
    """The worker's ledger (``GET /v1/capacity``): limits, commitments, what is free."""

    name: str | None = None  # the worker's, on its API's answer
    region: str | None = None
    totals: HostTotals
    used: HostUsage
    free: Free
    cordoned: bool
    cordon_reason: str | None = None  # why, when the cordon was given one (``draining``)
    reservations: int  # live reservations



class SnapshotCopy(WorkerRequest):
    """A snapshot sent to or fetched from another worker: what its tar stream is of (the
    ``x-bodega-snapshot`` header of ``PUT``/``GET /v1/snapshots/{id}/data``)."""

    id: SnapshotId
    volume_id: VolumeId
    app: str = Field(min_length=1, max_length=63)
    digest: str
    size: int
    volume_size_gb: int
    retention_days: int
    created_at: float
    expires_at: float
    origin: str  # the worker that took it
