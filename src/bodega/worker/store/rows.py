"""The worker's rows read from SQLite: typed rows (``core/records.py``) from stored columns.

The one place a stored column is decoded: JSON documents (a config, a task
handle, a last exit, check states), 0/1 booleans. ``queries.encode_column`` is
the way back.
"""

from __future__ import annotations

import json
import sqlite3
from functools import lru_cache

from bodega.model.capacity import Ask
from bodega.model.machine import ExitStatus
from bodega.model.machine_config import MachineConfig
from bodega.worker.core.checks import CheckStates
from bodega.worker.core.records import LeaseRow, MachineRow, ReservationRow, TaskHandle, VolumeRow


@lru_cache(maxsize=4096)
def parse_config(text: str) -> MachineConfig:
    """A stored config, parsed once: rows are read on every step, configs rarely change.

    Callers never mutate a MachineConfig (updates make a copy), so sharing one
    parsed object between rows is safe.
    """
    return MachineConfig.model_validate_json(text, context={"stored": True})


def machine_row(row: sqlite3.Row) -> MachineRow:
    last_exit = json.loads(row["last_exit"]) if row["last_exit"] else None
    return MachineRow(
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
        memory_limit_mb=row["memory_limit_mb"], host_stopped=bool(row["host_stopped"]),
        generation=row["generation"],
    )


def volume_row(row: sqlite3.Row) -> VolumeRow:
    return VolumeRow(
        id=row["id"], app=row["app"], name=row["name"], region=row["region"],
        size_gb=row["size_gb"], state=row["state"],
        attached_machine_id=row["attached_machine_id"], encrypted=bool(row["encrypted"]),
        fstype=row["fstype"], snapshot_retention=row["snapshot_retention"],
        auto_backup_enabled=bool(row["auto_backup_enabled"]),
        created_at=row["created_at"], updated_at=row["updated_at"],
        generation=row["generation"],
    )


def reservation_row(row: sqlite3.Row) -> ReservationRow:
    return ReservationRow(
        id=row["id"], app=row["app"], ask=Ask.from_wire(json.loads(row["ask"])),
        millicpus=row["millicpus"], memory_mb=row["memory_mb"], disk_gb=row["disk_gb"],
        gpus=row["gpus"], gpu_kind=row["gpu_kind"], expires_at=row["expires_at"],
        claimed_by=row["claimed_by"], created_at=row["created_at"],
    )


def lease_row(row: sqlite3.Row) -> LeaseRow:
    return LeaseRow(
        machine_id=row["machine_id"], nonce=row["nonce"], owner=row["owner"],
        description=row["description"], expires_at=row["expires_at"],
        version=row["version"],
    )
