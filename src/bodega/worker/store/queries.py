"""Queries over the worker's materialized tables; each takes the connection to use.

Writers take the connection of an open transaction (``Store.tx``) so that a
table change and its log entry commit together.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from bodega.model.machine import ExitStatus
from bodega.model.machine_answers import MachineVersion
from bodega.model.states import MachineState
from bodega.worker.core.checks import CheckStates
from bodega.worker.core.records import LeaseRow, MachineRow, ReservationRow, TaskHandle
from bodega.worker.store.rows import lease_row, machine_row, parse_config, reservation_row

# A live machine, spelled as the partial indexes on ``machines`` spell it (schema.py). Written
# into the statement, not bound: SQLite would otherwise prepare the statement again on every
# run to decide whether the index applies to the value bound (4-5x the cost of the query).
LIVE = f"state != '{MachineState.DESTROYED}'"

_MACHINE_COLUMNS = frozenset(
    {
        "state", "instance_id", "config", "millicpus", "memory_mb", "gpus", "gpu_kind",
        "ip_index", "private_ip", "netns", "cordoned", "holds_compute", "handle", "start_seq",
        "restarts", "volume_id", "placement", "last_exit", "checks", "memory_limit_mb",
        "host_stopped",
    }
)


def encode_column(value: Any) -> Any:
    """A column's value as SQLite stores it: JSON text for documents, 0/1 for booleans."""
    if isinstance(value, TaskHandle):
        return json.dumps(value.to_json())
    if isinstance(value, ExitStatus):
        return json.dumps(
            {
                "exit_code": value.exit_code, "signal": value.signal,
                "oom_killed": value.oom_killed, "requested_stop": value.requested_stop,
                "exited_at": value.exited_at,
            }
        )
    if isinstance(value, CheckStates):
        return json.dumps(value.to_json())
    if hasattr(value, "model_dump_json"):
        return value.model_dump_json(exclude_none=True)
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, bool):
        return int(value)
    return value


# -- machines -------------------------------------------------------------------
def insert_machine(conn: sqlite3.Connection, row: MachineRow) -> None:
    conn.execute(
        "INSERT INTO machines (id, app, name, region, state, instance_id, config, millicpus, "
        "memory_mb, gpus, gpu_kind, ip_index, private_ip, netns, cordoned, holds_compute, handle, "
        "start_seq, restarts, volume_id, placement, idempotency_key, last_exit, created_at, "
        f"updated_at, generation) VALUES ({', '.join('?' * 26)})",
        (
            row.id, row.app, row.name, row.region, row.state, row.instance_id,
            encode_column(row.config), row.millicpus, row.memory_mb, row.gpus, row.gpu_kind,
            row.ip_index, row.private_ip, row.netns, int(row.cordoned), int(row.holds_compute),
            encode_column(row.handle),
            row.start_seq, row.restarts, row.volume_id, row.placement_json,
            row.idempotency_key, encode_column(row.last_exit), row.created_at, row.updated_at,
            row.generation,
        ),
    )


def update_machine(conn: sqlite3.Connection, machine_id: str, now: float, **fields: Any) -> None:
    unknown = set(fields) - _MACHINE_COLUMNS
    if unknown:
        raise ValueError(f"not machine columns: {sorted(unknown)}")
    assignments = ", ".join(f"{name} = ?" for name in fields)
    values = [encode_column(value) for value in fields.values()]
    conn.execute(
        f"UPDATE machines SET {assignments}, updated_at = ? WHERE id = ?",
        (*values, now, machine_id),
    )


def forget_machine(conn: sqlite3.Connection, machine_id: str, worker: str, generation: int,
                   now: float) -> None:
    """The machine moved to ``worker``: its record, versions and lease go; where it went
    stays (``moved_away``), and so for its volume, which moved with it. Its log entries
    stay, the history of what this worker did."""
    found = conn.execute("SELECT volume_id FROM machines WHERE id = ?", (machine_id,)
                         ).fetchone()
    volume_id = None if found is None else found[0]
    if volume_id:
        conn.execute("DELETE FROM volumes WHERE id = ?", (volume_id,))
    conn.execute("DELETE FROM machines WHERE id = ?", (machine_id,))
    conn.execute("DELETE FROM versions WHERE machine_id = ?", (machine_id,))
    conn.execute("DELETE FROM leases WHERE machine_id = ?", (machine_id,))
    conn.execute(
        "INSERT INTO moved_away (machine_id, worker, generation, at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (machine_id) DO UPDATE SET worker = excluded.worker, "
        "generation = excluded.generation, at = excluded.at",
        (machine_id, worker, generation, now))
    if volume_id:
        conn.execute(
            "INSERT OR REPLACE INTO moved_away (machine_id, worker, generation, at) "
            "VALUES (?, ?, ?, ?)", (volume_id, worker, generation, now))


def moved_away(conn: sqlite3.Connection, machine_id: str) -> tuple[str, int] | None:
    """(the worker it moved to, its generation there) for a machine that left this one."""
    row = conn.execute("SELECT worker, generation FROM moved_away WHERE machine_id = ?",
                       (machine_id,)).fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


def moved_away_ids(conn: sqlite3.Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT machine_id FROM moved_away")}


def get_machine(conn: sqlite3.Connection, machine_id: str) -> MachineRow | None:
    row = conn.execute("SELECT * FROM machines WHERE id = ?", (machine_id,)).fetchone()
    return None if row is None else machine_row(row)


def machine_by_idempotency_key(
    conn: sqlite3.Connection, app: str, key: str
) -> MachineRow | None:
    row = conn.execute(
        "SELECT * FROM machines WHERE app = ? AND idempotency_key = ?", (app, key)
    ).fetchone()
    return None if row is None else machine_row(row)


def machine_name_taken(conn: sqlite3.Connection, app: str, name: str) -> bool:
    row = conn.execute(
        f"SELECT 1 FROM machines WHERE app = ? AND name = ? AND {LIVE}", (app, name)
    ).fetchone()
    return row is not None


def list_machines(
    conn: sqlite3.Connection, app: str | None = None, include_destroyed: bool = False
) -> list[MachineRow]:
    clauses, params = [], []
    if app is not None:
        clauses.append("app = ?")
        params.append(app)
    if not include_destroyed:
        clauses.append(LIVE)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(f"SELECT * FROM machines {where} ORDER BY created_at, id", params)
    return [machine_row(row) for row in rows.fetchall()]


def started_with_checks(conn: sqlite3.Connection) -> list[MachineRow]:
    """Started machines whose config names checks; the rest are never read or decoded.

    Health checks reconcile after commits, at most every quarter second, on every worker:
    SQLite's JSON functions skip the rows without checks, which are never decoded.
    """
    rows = conn.execute(
        "SELECT * FROM machines WHERE state = ? AND (json_extract(config, '$.checks') IS NOT NULL"
        " OR EXISTS (SELECT 1 FROM json_each(config, '$.services') AS s"
        " WHERE json_extract(s.value, '$.checks') IS NOT NULL))",
        (MachineState.STARTED,))
    return [machine_row(row) for row in rows.fetchall()]


def count_by_state(conn: sqlite3.Connection) -> dict[str, int]:
    """Machines per state, counted by SQLite (no row is decoded)."""
    return {str(state): int(n) for state, n in
            conn.execute("SELECT state, count(*) FROM machines GROUP BY state")}


def idle_addresses(conn: sqlite3.Connection) -> list[tuple[int, str, str | None]]:
    """Machines at rest (created, stopped or failed) that have been attached: each one's
    address index, id and private address."""
    return [(int(index), str(mid), ip) for index, mid, ip in conn.execute(
        "SELECT ip_index, id, private_ip FROM machines "
        "WHERE state IN ('created', 'stopped', 'failed') "
        "AND netns IS NOT NULL AND ip_index IS NOT NULL ORDER BY ip_index")]


def free_ip_indexes(conn: sqlite3.Connection, first: int, last: int, count: int) -> list[int]:
    """The lowest ``count`` addresses no live machine holds, in the order creates take them."""
    used = {
        row[0]
        for row in conn.execute(
            f"SELECT ip_index FROM machines WHERE {LIVE} AND ip_index IS NOT NULL")
    }
    free: list[int] = []
    for index in range(first, last + 1):
        if index not in used:
            free.append(index)
            if len(free) == count:
                break
    return free


# -- versions -------------------------------------------------------------------
def insert_version(
    conn: sqlite3.Connection, machine_id: str, instance_id: str, config_json: str, now: float
) -> None:
    conn.execute(
        "INSERT INTO versions (machine_id, instance_id, config, state, created_at) "
        "VALUES (?, ?, ?, 'current', ?)",
        (machine_id, instance_id, config_json, now),
    )


def replace_versions(conn: sqlite3.Connection, machine_id: str, keep: str) -> None:
    conn.execute(
        "UPDATE versions SET state = ? WHERE machine_id = ? AND instance_id != ?",
        (MachineState.REPLACED, machine_id, keep),
    )


def list_versions(conn: sqlite3.Connection, machine_id: str) -> list[MachineVersion]:
    rows = conn.execute(
        "SELECT instance_id, config FROM versions WHERE machine_id = ? ORDER BY instance_id DESC",
        (machine_id,),
    ).fetchall()
    return [MachineVersion(version=row[0], user_config=parse_config(row[1])) for row in rows]


# -- reservations ---------------------------------------------------------------
def insert_reservation(conn: sqlite3.Connection, row: ReservationRow) -> None:
    conn.execute(
        "INSERT INTO reservations (id, app, ask, millicpus, memory_mb, disk_gb, gpus, gpu_kind, "
        "expires_at, claimed_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            row.id, row.app, json.dumps(row.ask.to_wire()), row.millicpus, row.memory_mb,
            row.disk_gb,
            row.gpus, row.gpu_kind, row.expires_at, row.claimed_by, row.created_at,
        ),
    )


def get_reservation(conn: sqlite3.Connection, reservation_id: str) -> ReservationRow | None:
    row = conn.execute("SELECT * FROM reservations WHERE id = ?", (reservation_id,)).fetchone()
    return None if row is None else reservation_row(row)


def claim_reservation(conn: sqlite3.Connection, reservation_id: str, machine_id: str) -> None:
    conn.execute(
        "UPDATE reservations SET claimed_by = ? WHERE id = ?", (machine_id, reservation_id)
    )


def delete_reservation(conn: sqlite3.Connection, reservation_id: str) -> bool:
    cursor = conn.execute(
        "DELETE FROM reservations WHERE id = ? AND claimed_by IS NULL", (reservation_id,)
    )
    return cursor.rowcount > 0


def newest_stamp(conn: sqlite3.Connection) -> float:
    """The latest time this store recorded (0 when empty): what its log and its machines
    were last stamped with, by the worker's own clock."""
    (stamped,) = conn.execute(
        "SELECT max(coalesce((SELECT max(at) FROM ops), 0), "
        "coalesce((SELECT max(updated_at) FROM machines), 0))").fetchone()
    return float(stamped)


def live_reservations(conn: sqlite3.Connection, now: float) -> list[ReservationRow]:
    rows = conn.execute(
        "SELECT * FROM reservations WHERE claimed_by IS NULL AND expires_at > ?", (now,)
    ).fetchall()
    return [reservation_row(row) for row in rows]


def purge_reservations(conn: sqlite3.Connection, before: float) -> int:
    """Forget reservations that expired or were claimed before ``before``."""
    cursor = conn.execute(
        "DELETE FROM reservations WHERE expires_at < ? OR (claimed_by IS NOT NULL "
        "AND created_at < ?)",
        (before, before),
    )
    return cursor.rowcount


# -- leases ---------------------------------------------------------------------
def get_lease(conn: sqlite3.Connection, machine_id: str) -> LeaseRow | None:
    row = conn.execute("SELECT * FROM leases WHERE machine_id = ?", (machine_id,)).fetchone()
    return None if row is None else lease_row(row)


def put_lease(conn: sqlite3.Connection, lease: LeaseRow) -> None:
    conn.execute(
        "INSERT INTO leases (machine_id, nonce, owner, description, expires_at, version) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (machine_id) DO UPDATE SET nonce = excluded.nonce, "
        "owner = excluded.owner, description = excluded.description, "
        "expires_at = excluded.expires_at, version = excluded.version",
        (lease.machine_id, lease.nonce, lease.owner, lease.description, lease.expires_at,
         lease.version),
    )


def delete_lease(conn: sqlite3.Connection, machine_id: str) -> None:
    conn.execute("DELETE FROM leases WHERE machine_id = ?", (machine_id,))


def started_figures_rows(conn: sqlite3.Connection) -> list[tuple[str, str, str, str | None]]:
    """(id, app, region, netns) of every started machine: what a scrape of their figures
    labels them with, without decoding any config."""
    rows = conn.execute("SELECT id, app, region, netns FROM machines WHERE state = ? "
                        "ORDER BY id", (MachineState.STARTED,))
    return [(row[0], row[1], row[2], row[3]) for row in rows.fetchall()]
