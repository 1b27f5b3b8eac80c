"""Typed rows of the worker's materialized tables, and the task handle a machine row keeps.

Pure: the core reads them; the store builds them from SQLite rows
(``store/rows.py``) and writes them back (``store/queries.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from bodega.model.capacity import Ask
from bodega.model.json import JsonObject
from bodega.model.machine import ExitStatus
from bodega.model.machine_answers import Lease
from bodega.model.machine_config import MachineConfig
from bodega.worker.core.checks import CheckStates


class HandleData(TypedDict, total=False):
    """What a driver keeps in a handle to find its run again (the process drivers' files).

    Stored in the machine's record as a JSON object; a key a driver does not set is left
    out, as it was before this was typed, so records written either way read the same.
    """

    pidfile: str  # the run's pidfile, which its supervisor writes
    exitfile: str  # where the run's exit status lands
    start_time: int | None  # the process's start time (clock ticks since boot): pid reuse
    oom_base: int  # the cgroup's OOM kills before this run: later ones are its own


@dataclass(frozen=True)
class TaskHandle:
    """What the worker persists about a running task so it can re-adopt it."""

    driver: str
    machine_id: str
    instance_id: str
    start_seq: int
    pid: int | None = None
    started_at: float = 0.0
    data: HandleData = field(default_factory=lambda: HandleData())

    def to_json(self) -> JsonObject:  # as the machine's record stores it
        return {
            "driver": self.driver, "machine_id": self.machine_id,
            "instance_id": self.instance_id, "start_seq": self.start_seq,
            "pid": self.pid, "started_at": self.started_at, "data": self.data,
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> TaskHandle:  # as the record stored it
        return cls(
            driver=str(data["driver"]), machine_id=str(data["machine_id"]),
            instance_id=str(data["instance_id"]), start_seq=int(data["start_seq"]),
            pid=data.get("pid"), started_at=float(data.get("started_at", 0.0)),
            data=HandleData(**(data.get("data") or {})),
        )


@dataclass(frozen=True)
class MachineRow:
    id: str
    app: str
    name: str
    region: str
    state: str
    instance_id: str
    config: MachineConfig
    millicpus: int
    memory_mb: int
    gpus: int
    gpu_kind: str | None
    ip_index: int | None
    private_ip: str | None
    netns: str | None
    cordoned: bool
    holds_compute: bool
    handle: TaskHandle | None
    start_seq: int
    restarts: int
    volume_id: str | None
    # The broker's placement record as stored, JSON text: only ``GET .../placement`` reads
    # it, and rows are read on every step, so it is never decoded on the way.
    placement_json: str | None
    idempotency_key: str | None
    last_exit: ExitStatus | None
    created_at: float
    updated_at: float
    checks: CheckStates | None = None  # the current run's health checks, once one reported
    memory_limit_mb: int | None = None  # set live below memory_mb (PUT .../memory)
    # Started when its host's bodega stopped it (``HostStop``): it starts again when the
    # worker comes back, as its restart policy says (``core/policy.py``, ``comes_back``).
    host_stopped: bool = False
    # One more each time the machine moves to another worker: its registry row of the
    # newest generation wins over a row its former worker wrote (``core/moves.py``).
    generation: int = 0

    @property
    def memory_limit(self) -> int:
        """The memory limit its runs get: one set live, else all of its reservation."""
        if self.memory_limit_mb is None:
            return self.memory_mb
        return min(self.memory_limit_mb, self.memory_mb)


@dataclass(frozen=True)
class VolumeRow:
    id: str
    app: str
    name: str
    region: str
    size_gb: int
    state: str
    attached_machine_id: str | None
    encrypted: bool
    fstype: str
    snapshot_retention: int
    auto_backup_enabled: bool
    created_at: float
    updated_at: float
    generation: int = 0  # one more each time it moves with its machine (``core/moves.py``)


@dataclass(frozen=True)
class ReservationRow:
    id: str
    app: str
    ask: Ask
    millicpus: int
    memory_mb: int
    disk_gb: int
    gpus: int
    gpu_kind: str | None
    expires_at: float
    claimed_by: str | None
    created_at: float


@dataclass(frozen=True)
class LeaseRow:
    machine_id: str
    nonce: str
    owner: str
    description: str
    expires_at: float
    version: str

    def answer(self) -> Lease:
        return Lease(nonce=self.nonce, expires_at=int(self.expires_at), owner=self.owner,
                     description=self.description, version=self.version)


@dataclass(frozen=True)
class SnapshotRow:
    id: str
    volume_id: str
    app: str
    status: str  # creating, created, failed
    size: int
    digest: str
    volume_size_gb: int
    retention_days: int
    created_at: float
    expires_at: float
    origin: str = ""  # the worker a copy came from; "": this one took it
    copies: str = ""  # the other workers holding a copy, comma separated (the origin's row)
    copy_tries: int = 0  # failed tries at sending a copy off this host

    @property
    def holders(self) -> list[str]:
        return [name for name in self.copies.split(",") if name]
