"""The worker's durable store: SQLite in WAL mode with full synchronous commits.

Every change happens in one ``BEGIN IMMEDIATE`` transaction that appends to
the ``ops`` log and updates the materialized tables together, so a crash at
any instant leaves either both or neither. All access is from the event loop
thread; a commit costs a fraction of a millisecond (one fsync), and running
check-and-set logic without an ``await`` inside makes it atomic with respect
to every other request on this worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bodega.model.errors import StorageFull
from bodega.model.ids import new_ulid
from bodega.model.machine import EventRequest, MachineEvent
from bodega.runtime.sqlite import open_database
from bodega.runtime.steady_clock import SteadyClock
from bodega.worker.core.payloads import Payload, payload_from_json, payload_json
from bodega.worker.store import queries
from bodega.worker.store.log_reader import LogReader
from bodega.worker.store.schema import MIGRATIONS

Clock = Callable[[], float]


@dataclass(frozen=True)
class Operation:
    op_id: str
    resource_id: str
    fsm: str
    step: str
    status: str
    payload: Payload  # stored as its JSON object (``core/payloads.py``)
    error: str | None
    started_at: float
    updated_at: float


class Store(LogReader):
    """The store: its transactions, its log and its operations (reads of the log: ``LogReader``)."""

    def __init__(self, path: Path, clock: Clock | None = None, *, fsync: bool = True) -> None:
        """``clock``: the wall clock its records are stamped with and their deadlines
        measured against; by default one that never runs backwards, from the newest time
        already recorded (``SteadyClock``)."""
        self.path = path
        # FULL: a commit is on disk before it returns. NORMAL (fsync=False) survives a crash
        # of the worker but not of the host; only simulations of many hosts on one disk use it.
        self.synchronous = "FULL" if fsync else "NORMAL"
        self.db = open_database(path, MIGRATIONS, synchronous=self.synchronous)
        self.db.row_factory = sqlite3.Row
        self.clock: Clock = clock or SteadyClock(floor=queries.newest_stamp(self.db))
        # Every change to a machine or volume is logged in the transaction that makes it, so
        # the resources ``append`` saw are exactly those a commit changed: listeners (the
        # ``/wait`` wake-ups) hear of each, whatever code path made the change.
        self._touched: set[str] = set()
        self._listeners: list[Callable[[str], None]] = []
        self.syncs = 0  # commits made durable by their own fsync: what group commit saves

    def close(self) -> None:
        self.db.close()

    @property
    def schema_version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    # -- transactions ---------------------------------------------------------
    def on_commit(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(resource_id)`` after each commit, once per resource it logged."""
        self._listeners.append(listener)

    @contextmanager
    def tx(self, *, host_local: bool = False) -> Iterator[sqlite3.Connection]:
        """One atomic, durable unit: commits on success, rolls back on any exception.

        A full disk (in a statement or at the commit) becomes ``StorageFull``, a clear
        refusal, with the transaction rolled back so the next one starts clean.

        ``host_local``: the commit records a step whose effect lives only on this host (a
        namespace, a cgroup, a process), so it is not fsynced: it survives a crash of the
        worker (WAL), and the next full commit makes it durable with everything before it
        (the WAL is written in order). A power loss that drops it drops the effect too
        (no process survives a reboot), and recovery performs the step again. Anything
        answered to a caller is committed in full before the answer."""
        synced = self.synchronous == "FULL"
        if host_local and synced:
            self.db.execute("PRAGMA synchronous = NORMAL")
        try:
            with self._transaction(fsynced=synced and not host_local) as conn:
                yield conn
        finally:
            if host_local and synced:
                self.db.execute("PRAGMA synchronous = FULL")

    async def synced(self) -> None:
        """Every commit so far on disk (a ``tx(host_local=True)`` one too): the WAL fsynced
        in a thread, so the loop goes on and an effect begun need not wait for the disk."""
        if self.synchronous != "FULL":
            return
        await asyncio.to_thread(_fsync, self.path.with_name(self.path.name + "-wal"))
        self.syncs += 1

    @contextmanager
    def _transaction(self, *, fsynced: bool) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        self._touched.clear()
        try:
            yield self.db
            self.db.execute("COMMIT")
        except BaseException as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            self._touched.clear()
            full = storage_error(exc)
            if full is exc:
                raise
            raise full from exc
        self.syncs += fsynced
        touched, self._touched = self._touched, set()
        for resource_id in touched:
            for listener in self._listeners:
                listener(resource_id)

    @contextmanager
    def savepoint(self, conn: sqlite3.Connection) -> Iterator[None]:
        """A part of the open transaction that fails alone: on an exception its changes (and
        the resources it touched) are undone, the exception goes on, the transaction stays."""
        touched = set(self._touched)
        conn.execute("SAVEPOINT part")
        try:
            yield
        except BaseException as exc:
            if conn.in_transaction:  # SQLite may have rolled the whole transaction back
                conn.execute("ROLLBACK TO part")
                conn.execute("RELEASE part")
            self._touched = touched
            full = storage_error(exc)
            if full is exc:
                raise
            raise full from exc
        conn.execute("RELEASE part")

    # -- meta -----------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- the log ------------------------------------------------------------
    def append(
        self,
        conn: sqlite3.Connection,
        *,
        op_id: str,
        resource_id: str,
        fsm: str,
        step: str,
        payload: Mapping[str, object],  # any JSON object: written as JSON right here
        event: MachineEvent | None = None,
    ) -> int:
        self._touched.add(resource_id)
        cursor = conn.execute(
            "INSERT INTO ops (op_id, resource_id, fsm, step, payload, event, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                op_id, resource_id, fsm, step, json.dumps(payload, separators=(",", ":")),
                None if event is None else event.model_dump_json(exclude_none=True),
                self.clock(),
            ),
        )
        return int(cursor.lastrowid or 0)

    def new_event(
        self, type_: str, status: str, source: str, request: EventRequest | None = None
    ) -> MachineEvent:
        now_ms = int(self.clock() * 1000)
        return MachineEvent(
            id=new_ulid(now_ms), type=type_, status=status, source=source,
            timestamp=now_ms, request=request,
        )

    # -- operations -------------------------------------------------------------
    def begin_operation(
        self,
        conn: sqlite3.Connection,
        *,
        resource_id: str,
        step: str,
        payload: Payload,
        event: MachineEvent | None = None,
    ) -> Operation:
        """Record an operation of ``payload``'s state machine, at ``step``."""
        now = self.clock()
        op_id = new_ulid(int(now * 1000))
        fsm, stored = payload.fsm, payload_json(payload)
        conn.execute(
            "INSERT INTO operations (op_id, resource_id, fsm, step, status, payload, "
            "started_at, updated_at) VALUES (?, ?, ?, ?, 'running', ?, ?, ?)",
            (op_id, resource_id, fsm, step, json.dumps(stored), now, now),
        )
        self.append(
            conn, op_id=op_id, resource_id=resource_id, fsm=fsm, step=step,
            payload=stored, event=event,
        )
        return Operation(op_id, resource_id, fsm, step, "running", payload, None, now, now)

    def advance_operation(
        self,
        conn: sqlite3.Connection,
        op: Operation,
        *,
        step: str,
        payload: Payload,
        status: str = "running",
        error: str | None = None,
        event: MachineEvent | None = None,
    ) -> Operation:
        now = self.clock()
        stored = payload_json(payload)
        conn.execute(
            "UPDATE operations SET step = ?, status = ?, payload = ?, error = ?, updated_at = ? "
            "WHERE op_id = ?",
            (step, status, json.dumps(stored), error, now, op.op_id),
        )
        self.append(
            conn, op_id=op.op_id, resource_id=op.resource_id, fsm=op.fsm, step=step,
            payload=stored, event=event,
        )
        return Operation(
            op.op_id, op.resource_id, op.fsm, step, status, payload, error, op.started_at, now
        )

    def running_operations(self) -> list[Operation]:
        rows = self.db.execute(
            "SELECT * FROM operations WHERE status = 'running' ORDER BY op_id"
        ).fetchall()
        return [_operation(row) for row in rows]

    def operation(self, op_id: str) -> Operation | None:
        row = self.db.execute("SELECT * FROM operations WHERE op_id = ?", (op_id,)).fetchone()
        return None if row is None else _operation(row)

    def last_operation(self, resource_id: str) -> Operation | None:
        row = self.db.execute(
            "SELECT * FROM operations WHERE resource_id = ? ORDER BY op_id DESC LIMIT 1",
            (resource_id,),
        ).fetchone()
        return None if row is None else _operation(row)

    def compact(self, keep_after: float) -> int:
        """Drop log rows of finished operations older than ``keep_after``, keeping events.

        The log is compactable, never rewritten in place: rows are only deleted,
        and never those that carry a machine event or belong to a running operation.
        """
        with self.tx() as conn:
            cursor = conn.execute(
                "DELETE FROM ops WHERE at < ? AND event IS NULL AND op_id NOT IN "
                "(SELECT op_id FROM operations WHERE status = 'running')",
                (keep_after,),
            )
            conn.execute(
                "DELETE FROM operations WHERE status != 'running' AND updated_at < ?",
                (keep_after,),
            )
            return cursor.rowcount


def _fsync(path: Path) -> None:
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def storage_error(exc: BaseException) -> BaseException:
    """``exc``, or a clear refusal (507) if it is SQLite's full disk."""
    if isinstance(exc, sqlite3.OperationalError) and \
            exc.sqlite_errorcode == sqlite3.SQLITE_FULL:
        return StorageFull(f"the worker's disk is full; nothing was recorded ({exc})")
    return exc


def _operation(row: sqlite3.Row) -> Operation:
    return Operation(
        op_id=row["op_id"], resource_id=row["resource_id"], fsm=row["fsm"], step=row["step"],
        status=row["status"], payload=payload_from_json(row["fsm"], json.loads(row["payload"])),
        error=row["error"],
        started_at=row["started_at"], updated_at=row["updated_at"],
    )
