"""Typed rows of the worker's materialized tables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from bodega.model.machine import ExitStatus
from bodega.model.machine_config import MachineConfig
from bodega.worker.core.checks import CheckStates
from bodega.worker.drivers.base import TaskHandle

if TYPE_CHECKING:
    import sqlite3  # rows come from the store; the pure core reads them without SQLite


@lru_cache(maxsize=4096)
def parse_config(text: str) -> MachineConfig:
    """A stored config, parsed once: rows are read on every step, configs rarely change.

    Callers never mutate a MachineConfig (updates make a copy), so sharing one
    parsed object between rows is safe.
    """
    return MachineConfig.model_validate_json(text, context={"stored": True})


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

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> MachineRow:
        last_exit = json.loads(row["last_exit"]) if row["last_exit"] else None
        return cls(
            id=row["id"], app=row["app"], name=row["name"], region=row["region"],
            state=row["state"], instance_id=row["instance_id"],
            config=parse_config(row["config"]),
            millicpus=row["millicpus"], memory_mb=row["memory_mb"], gpus=row["gpus"],
            gpu_kind=row["gpu_kind"], ip_index=row["ip_index"], private_ip=row["private_ip"],
            netns=row["netns"], cordoned=bool(row["cordoned"]),
            holds_compute=bool(row["holds_compute"]),
            handle=TaskHandle.from_json(json.loads(row["handle"])) if row["handle"] else None,
            start_seq=row["start_seq"], restarts=row["restarts"], volume_id=row["volume_id"],
            placement_json=row["placement"],
            idempotency_key=row["idempotency_key"],
            last_exit=ExitStatus(**last_exit) if last_exit else None,
            created_at=row["created_at"], updated_at=row["updated_at"],
            checks=CheckStates.from_json(json.loads(row["checks"])) if row["checks"] else None,
        )


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

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> VolumeRow:
        return cls(
            id=row["id"], app=row["app"], name=row["name"], region=row["region"],
            size_gb=row["size_gb"], state=row["state"],
            attached_machine_id=row["attached_machine_id"], encrypted=bool(row["encrypted"]),
            fstype=row["fstype"], snapshot_retention=row["snapshot_retention"],
            auto_backup_enabled=bool(row["auto_backup_enabled"]),
            created_at=row["created_at"], updated_at=row["updated_at"],
        )


@dataclass(frozen=True)
class ReservationRow:
    id: str
    app: str
    ask: dict[str, Any]
    millicpus: int
    memory_mb: int
    disk_gb: int
    gpus: int
    gpu_kind: str | None
    expires_at: float
    claimed_by: str | None
    created_at: float

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> ReservationRow:
        return cls(
            id=row["id"], app=row["app"], ask=json.loads(row["ask"]),
            millicpus=row["millicpus"], memory_mb=row["memory_mb"], disk_gb=row["disk_gb"],
            gpus=row["gpus"], gpu_kind=row["gpu_kind"], expires_at=row["expires_at"],
            claimed_by=row["claimed_by"], created_at=row["created_at"],
        )


@dataclass(frozen=True)
class LeaseRow:
    machine_id: str
    nonce: str
    owner: str
    description: str
    expires_at: float
    version: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> LeaseRow:
        return cls(
            machine_id=row["machine_id"], nonce=row["nonce"], owner=row["owner"],
            description=row["description"], expires_at=row["expires_at"],
            version=row["version"],
        )

    def to_wire(self) -> dict[str, Any]:
        return {
            "nonce": self.nonce, "expires_at": int(self.expires_at), "owner": self.owner,
            "description": self.description, "version": self.version,
        }
