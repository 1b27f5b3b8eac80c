"""Queries over the worker's volumes table; each takes the connection to use."""

from __future__ import annotations

import sqlite3
from typing import Any

from bodega.worker.core.records import VolumeRow
from bodega.worker.store.queries import encode_column
from bodega.worker.store.rows import volume_row


# -- volumes --------------------------------------------------------------------
def insert_volume(conn: sqlite3.Connection, row: VolumeRow) -> None:
    conn.execute(
        "INSERT INTO volumes (id, app, name, region, size_gb, state, attached_machine_id, "
        "encrypted, fstype, snapshot_retention, auto_backup_enabled, created_at, updated_at, "
        "generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            row.id, row.app, row.name, row.region, row.size_gb, row.state,
            row.attached_machine_id, int(row.encrypted), row.fstype, row.snapshot_retention,
            int(row.auto_backup_enabled), row.created_at, row.updated_at, row.generation,
        ),
    )


_VOLUME_COLUMNS = frozenset(
    {"size_gb", "state", "attached_machine_id", "snapshot_retention", "auto_backup_enabled"}
)


def update_volume(conn: sqlite3.Connection, volume_id: str, now: float, **fields: Any) -> None:
    unknown = set(fields) - _VOLUME_COLUMNS
    if unknown:
        raise ValueError(f"not volume columns: {sorted(unknown)}")
    assignments = ", ".join(f"{name} = ?" for name in fields)
    values = [encode_column(value) for value in fields.values()]
    conn.execute(
        f"UPDATE volumes SET {assignments}, updated_at = ? WHERE id = ?",
        (*values, now, volume_id),
    )


def get_volume(conn: sqlite3.Connection, volume_id: str) -> VolumeRow | None:
    row = conn.execute("SELECT * FROM volumes WHERE id = ?", (volume_id,)).fetchone()
    return None if row is None else volume_row(row)


def list_volumes(
    conn: sqlite3.Connection, app: str | None = None, include_destroyed: bool = False
) -> list[VolumeRow]:
    clauses, params = [], []
    if app is not None:
        clauses.append("app = ?")
        params.append(app)
    if not include_destroyed:
        clauses.append("state != 'destroyed'")
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(f"SELECT * FROM volumes {where} ORDER BY created_at, id", params)
    return [volume_row(row) for row in rows.fetchall()]
