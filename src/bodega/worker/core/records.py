"""Typed rows of the worker's materialized tables, and the task handle a machine row keeps.

Pure: the core reads them; the store builds them from SQLite rows
(``store/rows.py``) and writes them back (``store/queries.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bodega.model.capacity import Ask
from bodega.model.machine import ExitStatus
from bodega.model.machine_answers import Lease
from bodega.model.machine_config import MachineConfig
from bodega.worker.core.checks import CheckStates


@dataclass(frozen=True)
class TaskHandle:
    """What the worker persists about a running task so it can re-adopt it."""

    driver: str
    machine_id: str
    instance_id: str
    start_seq: int
    pid: int | None = None
    started_at: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "driver": self.driver, "machine_id": self.machine_id,
            "instance_id": self.instance_id, "start_seq": self.start_seq,
            "pid": self.pid, "started_at": self.started_at, "data": self.data,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskHandle:
        return cls(
            driver=str(data["driver"]), machine_id=str(data["machine_id"]),
            instance_id=str(data["instance_id"]), start_seq=int(data["start_seq"]),
            pid=data.get("pid"), started_at=float(data.get("started_at", 0.0)),
            data=dict(data.get("data") or {}),
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
