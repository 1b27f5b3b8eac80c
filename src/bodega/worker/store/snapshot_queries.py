"""Queries over the worker's volume snapshots table; each takes the connection to use."""

from __future__ import annotations

import sqlite3
from dataclasses import astuple, fields

from bodega.worker.core.records import SnapshotRow

_COLUMNS = [f.name for f in fields(SnapshotRow)]


def _row(row: sqlite3.Row) -> SnapshotRow:
    return SnapshotRow(**{name: row[name] for name in _COLUMNS})


def insert_snapshot(conn: sqlite3.Connection, row: SnapshotRow) -> None:
    conn.execute(f"INSERT INTO snapshots ({', '.join(_COLUMNS)}) "
                 f"VALUES ({', '.join('?' * len(_COLUMNS))})", astuple(row))


def finish_snapshot(conn: sqlite3.Connection, snapshot_id: str, status: str, size: int,
                    digest: str) -> None:
    conn.execute("UPDATE snapshots SET status = ?, size = ?, digest = ? WHERE id = ?",
                 (status, size, digest, snapshot_id))


def delete_snapshot(conn: sqlite3.Connection, snapshot_id: str) -> None:
    conn.execute("DELETE FROM snapshots WHERE id = ?", (snapshot_id,))


def get_snapshot(conn: sqlite3.Connection, snapshot_id: str) -> SnapshotRow | None:
    row = conn.execute("SELECT * FROM snapshots WHERE id = ?", (snapshot_id,)).fetchone()
    return None if row is None else _row(row)


def volume_snapshots(conn: sqlite3.Connection, volume_id: str) -> list[SnapshotRow]:
    rows = conn.execute("SELECT * FROM snapshots WHERE volume_id = ? AND status = 'created' "
                        "ORDER BY created_at, id", (volume_id,))
    return [_row(row) for row in rows.fetchall()]


def snapshots_in(conn: sqlite3.Connection, status: str) -> list[SnapshotRow]:
    rows = conn.execute("SELECT * FROM snapshots WHERE status = ?", (status,))
    return [_row(row) for row in rows.fetchall()]


def expired_snapshots(conn: sqlite3.Connection, now: float) -> list[SnapshotRow]:
    rows = conn.execute("SELECT * FROM snapshots WHERE expires_at <= ?", (now,))
    return [_row(row) for row in rows.fetchall()]


def set_copies(conn: sqlite3.Connection, snapshot_id: str, copies: list[str],
               tries: int) -> None:
    conn.execute("UPDATE snapshots SET copies = ?, copy_tries = ? WHERE id = ?",
                 (",".join(copies), tries, snapshot_id))


def uncopied(conn: sqlite3.Connection) -> list[SnapshotRow]:
    """The snapshots this worker took that no other worker holds yet, oldest first."""
    rows = conn.execute("SELECT * FROM snapshots WHERE status = 'created' AND origin = '' "
                        "AND copies = '' ORDER BY created_at, id")
    return [_row(row) for row in rows.fetchall()]


def newest_taken(conn: sqlite3.Connection) -> dict[str, float]:
    """Volume id -> when its newest snapshot on this worker was taken."""
    rows = conn.execute("SELECT volume_id, MAX(created_at) AS at FROM snapshots "
                        "WHERE status = 'created' AND origin = '' GROUP BY volume_id")
    return {row["volume_id"]: row["at"] for row in rows.fetchall()}
