"""One user statement run on a read-only connection to the replica, within its bounds.

Each run opens its own connection (``mode=ro``), makes the public views
(``catalog.py``), turns on ``query_only``, caps the length of any string or blob
SQLite builds and the databases it may attach (none), sets the read policy as its
authorizer (``policy.py``) and a progress handler that interrupts SQLite at the
time limit, then reads at most the row and size limits of rows. The connection
is closed at the end of the run: the replica's writer never waits on it, and
its WAL is never held back by a reader a client keeps waiting.

A statement refused, malformed, or failing before its first row raises the
``BodegaError`` a client gets as a 4xx (a write is 403, everything else 400).
A failure once rows were read (a bound reached, a runtime error) is ``stopped``
on the result: the rows so far are sent, then an error line.

Blocking: call ``run`` in a thread.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bodega.model.errors import BadRequest, BodegaError, Forbidden, Unavailable
from bodega.registry.api.core.catalog import unknown_column, unknown_table, views
from bodega.registry.api.core.changes import Values
from bodega.registry.api.core.limits import Bound, QueryLimits, cut
from bodega.registry.api.core.policy import ReadPolicy, Refusal
from bodega.wire.public.queries import Statement, value

PROGRESS_STEPS = 1000  # SQLite's virtual machine steps between looks at the clock
ROW_FRAME = len('{"row":[,]}\n') + 6  # a row line's bytes besides its values (a number of 6)
# SQLite's words when a write gets past the authorizer to the read-only connection.
WRITE_WORDS = ("readonly database", "may not be modified", "cannot modify", "query_only")


@dataclass(frozen=True)
class Result:
    columns: tuple[str, ...]
    rows: tuple[Values, ...]
    tables: frozenset[str]  # the replicated tables the statement read
    seconds: float  # SQLite's time on it
    stopped: str | None = None  # why it ended before its last row (a bound, an error)
    bound: Bound | None = None  # the bound it was cut at, if it was


class Clock:
    """The progress handler's deadline: it tells SQLite to stop once it passes."""

    def __init__(self, seconds: float) -> None:
        self.start = time.monotonic()
        self.deadline = self.start + seconds
        self.expired = False

    def check(self) -> int:
        if time.monotonic() > self.deadline:
            self.expired = True
            return 1
        return 0

    @property
    def spent(self) -> float:
        return time.monotonic() - self.start


class Reader:
    def __init__(self, view_path: Path | str, limits: QueryLimits) -> None:
        self.view_path = Path(view_path)
        self.limits = limits

    def run(self, statement: Statement) -> Result:
        db = self._open()
        try:
            return self._run(db, statement)
        finally:
            db.close()

    def _open(self) -> sqlite3.Connection:
        if not self.view_path.exists():
            raise Unavailable("the registry's view is not there yet: the agent has not "
                              "opened its replica")
        try:
            db = sqlite3.connect(f"{self.view_path.resolve().as_uri()}?mode=ro", uri=True,
                                 isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise Unavailable(f"the registry's view cannot be opened: {exc}") from None
        try:
            db.execute("PRAGMA busy_timeout = 1000")
            return db
        except BaseException:
            db.close()
            raise

    def _run(self, db: sqlite3.Connection, statement: Statement) -> Result:
        nonce = secrets.token_hex(8)
        try:
            for made in views(nonce):
                db.execute(made)
        except sqlite3.Error as exc:
            raise Unavailable(f"the registry's view cannot be read: {exc}") from None
        db.execute("PRAGMA query_only = 1")
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.limits.bytes)
        db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        policy = ReadPolicy(nonce)
        clock = Clock(self.limits.time)
        db.set_authorizer(policy.decide)
        db.set_progress_handler(clock.check, PROGRESS_STEPS)
        try:
            cursor = db.execute(statement.sql, statement.params)
        except sqlite3.Error as exc:
            raise self._refused(exc, policy.refusal, clock) from None
        columns = tuple(d[0] for d in cursor.description or ())
        rows: list[Values] = []
        size = 0
        try:
            for raw in cursor:  # a row at a time: a failure keeps the rows before it
                values = tuple(value(v) for v in raw)
                size += len(json.dumps(values, ensure_ascii=False)) + ROW_FRAME
                if len(rows) >= self.limits.rows or size > self.limits.bytes:
                    bound = Bound.ROWS if len(rows) >= self.limits.rows else Bound.BYTES
                    return self._stopped(columns, rows, policy, clock, bound)
                rows.append(values)
        except sqlite3.Error as exc:
            if not rows:
                raise self._refused(exc, policy.refusal, clock) from None
            found = self._bound(exc, clock)
            message = cut(found, self.limits) if found else f"query stopped: {exc}"
            return Result(columns, tuple(rows), frozenset(policy.tables), clock.spent,
                          message, found)
        return Result(columns, tuple(rows), frozenset(policy.tables), clock.spent)

    def _stopped(self, columns: tuple[str, ...], rows: Sequence[Values], policy: ReadPolicy,
                 clock: Clock, bound: Bound) -> Result:
        return Result(columns, tuple(rows), frozenset(policy.tables), clock.spent,
                      cut(bound, self.limits), bound)

    def _bound(self, exc: sqlite3.Error, clock: Clock) -> Bound | None:
        if clock.expired and getattr(exc, "sqlite_errorname", "") == "SQLITE_INTERRUPT":
            return Bound.TIME
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_TOOBIG":
            return Bound.BYTES
        return None

    def _refused(self, exc: sqlite3.Error, refusal: Refusal | None,
                 clock: Clock) -> BodegaError:
        """The 4xx for a statement that failed before its first row."""
        if refusal is not None:
            if refusal.kind == "table":
                return BadRequest(f"invalid_argument: {refusal.message}")
            return Forbidden(refusal.message)
        bound = self._bound(exc, clock)
        if bound is not None:
            return BadRequest(f"invalid_argument: {cut(bound, self.limits)}")
        text = str(exc)
        if any(words in text for words in WRITE_WORDS):
            return Forbidden("the registry is read-only through this API: the statement "
                             f"would write ({text})")
        if text.startswith("no such table: "):
            name = text.removeprefix("no such table: ")
            return BadRequest(f"invalid_argument: {unknown_table(name)}")
        if text.startswith("no such column: "):
            name = text.removeprefix("no such column: ")
            return BadRequest(f"invalid_argument: {unknown_column(name)}")
        return BadRequest(f"invalid_argument: {text}")
