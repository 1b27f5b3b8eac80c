"""The subscriptions' own file: each subscription, its current result, its recent changes.

A subscription outlives the agent process that serves it: its statement, the
tables it reads, its result as last computed (each row with its number) and
the last ``kept_changes`` changes (``window.py``) are kept in a SQLite file of
their own in the agent's state directory, never in the replica. On a restart
each subscription's query is run again and diffed against the result kept
here, so a client resuming from the last change it saw gets what changed
while the agent was down.

A refresh (``apply``) writes the changes, the rows that changed and the
subscription's counters in one transaction: a crash leaves the file at the
result before or after, never between.

Blocking: the agent's subscriptions call it from one thread (``writer``); the
change feed reads on a connection of its own.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bodega.registry.api.core.changes import Diff, ResultRow, RowChange, Values
from bodega.registry.api.core.window import Kept
from bodega.runtime.sqlite import open_database
from bodega.wire.public.queries import Statement

FILE = "subscriptions.db"

MIGRATIONS: tuple[str, ...] = (
    """
CREATE TABLE subscriptions (
    id TEXT PRIMARY KEY,
    statement TEXT NOT NULL UNIQUE,  -- the statement as JSON: one subscription per statement
    tables TEXT NOT NULL,            -- JSON list: the replicated tables its query reads
    columns TEXT NOT NULL,           -- JSON list: its result's column names
    next_number INTEGER NOT NULL,    -- the number its next new row takes
    trimmed INTEGER NOT NULL,        -- changes up to this one are no longer kept
    last INTEGER NOT NULL,           -- its last change
    used REAL NOT NULL               -- when a client last came or went (idle ones expire)
);
CREATE TABLE result_rows (
    subscription TEXT NOT NULL,
    number INTEGER NOT NULL,
    row TEXT NOT NULL,               -- JSON list of the row's values
    PRIMARY KEY (subscription, number)
) WITHOUT ROWID;
CREATE TABLE changes (
    subscription TEXT NOT NULL,
    id INTEGER NOT NULL,
    kind TEXT NOT NULL,              -- insert, update or delete
    number INTEGER NOT NULL,
    row TEXT NOT NULL,
    PRIMARY KEY (subscription, id)
) WITHOUT ROWID;
""",
)


class StoreClosed(Exception):
    """The agent stopped: the store is closed under a follower."""


@dataclass(frozen=True)
class Stored:
    id: str
    statement: Statement
    tables: frozenset[str]
    columns: tuple[str, ...]
    next_number: int
    kept: Kept


@dataclass(frozen=True)
class LoggedChange:
    id: int
    change: RowChange


def _json(values: Sequence[object]) -> str:
    return json.dumps(list(values), separators=(",", ":"), ensure_ascii=False)


def _values(text: str) -> Values:
    return tuple(json.loads(text))


def statement_key(statement: Statement) -> str:
    return json.dumps([statement.sql, statement.params], separators=(",", ":"),
                      ensure_ascii=False, sort_keys=True)


class SubscriptionStore:
    def __init__(self, directory: Path, *, wall: Callable[[], float] = time.time) -> None:
        self.path = directory / FILE
        self._wall = wall
        self.db = open_database(self.path, MIGRATIONS, synchronous="NORMAL")
        self._feed = sqlite3.connect(str(self.path), isolation_level=None,
                                     check_same_thread=False)
        self._feed_lock = threading.Lock()
        self.closed = False

    def close(self) -> None:
        self.db.close()
        with self._feed_lock:
            self._feed.close()
            self.closed = True

    # ── subscriptions ────────────────────────────────────────────────────────

    def all(self) -> list[Stored]:
        return [self._stored(*found) for found in self.db.execute(
            "SELECT id, statement, tables, columns, next_number, trimmed, last "
            "FROM subscriptions ORDER BY id")]

    def get(self, sub: str) -> Stored | None:
        found = self.db.execute(
            "SELECT id, statement, tables, columns, next_number, trimmed, last "
            "FROM subscriptions WHERE id = ?", (sub,)).fetchone()
        return None if found is None else self._stored(*found)

    def find(self, statement: Statement) -> Stored | None:
        found = self.db.execute(
            "SELECT id, statement, tables, columns, next_number, trimmed, last "
            "FROM subscriptions WHERE statement = ?", (statement_key(statement),)).fetchone()
        return None if found is None else self._stored(*found)

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM subscriptions").fetchone()[0])

    def create(self, sub: str, statement: Statement, tables: Iterable[str],
               columns: Sequence[str], rows: Sequence[ResultRow]) -> Stored:
        with self._tx():
            self.db.execute(
                "INSERT INTO subscriptions (id, statement, tables, columns, next_number, "
                "trimmed, last, used) VALUES (?, ?, ?, ?, ?, 0, 0, ?)",
                (sub, statement_key(statement), _json(sorted(tables)), _json(columns),
                 len(rows) + 1, self._wall()))
            self.db.executemany(
                "INSERT INTO result_rows (subscription, number, row) VALUES (?, ?, ?)",
                [(sub, row.number, _json(row.values)) for row in rows])
        found = self.get(sub)
        assert found is not None
        return found

    def touch(self, sub: str) -> None:
        self.db.execute("UPDATE subscriptions SET used = ? WHERE id = ?", (self._wall(), sub))

    def expire(self, idle: float, followed: Iterable[str]) -> list[str]:
        """Remove subscriptions no client followed for ``idle`` seconds (``followed`` are
        followed now); their ids."""
        busy = set(followed)
        stale = [sub for (sub,) in self.db.execute(
            "SELECT id FROM subscriptions WHERE used < ?", (self._wall() - idle,))
            if sub not in busy]
        with self._tx():
            for sub in stale:
                for table in ("changes", "result_rows"):
                    self.db.execute(f"DELETE FROM {table} WHERE subscription = ?", (sub,))
                self.db.execute("DELETE FROM subscriptions WHERE id = ?", (sub,))
        return stale

    # ── results and changes ──────────────────────────────────────────────────

    def rows(self, sub: str) -> list[ResultRow]:
        """The result as last computed, in the order its rows came into it."""
        return [ResultRow(number, _values(row)) for number, row in self.db.execute(
            "SELECT number, row FROM result_rows WHERE subscription = ? ORDER BY number",
            (sub,))]

    def apply(self, stored: Stored, diff: Diff, keep: int) -> Kept:
        """Record a refresh: its changes appended, the changed rows, the counters."""
        kept = stored.kept.after(len(diff.changes), keep)
        if not diff.changes:
            return kept
        first = stored.kept.last + 1
        with self._tx():
            self.db.executemany(
                "INSERT INTO changes (subscription, id, kind, number, row) VALUES (?, ?, ?, ?, ?)",
                [(stored.id, first + i, c.kind, c.number, _json(c.values))
                 for i, c in enumerate(diff.changes)])
            self.db.executemany(
                "DELETE FROM result_rows WHERE subscription = ? AND number = ?",
                [(stored.id, c.number) for c in diff.changes if c.kind == "delete"])
            self.db.executemany(
                "INSERT OR REPLACE INTO result_rows (subscription, number, row) VALUES (?, ?, ?)",
                [(stored.id, c.number, _json(c.values)) for c in diff.changes
                 if c.kind != "delete"])
            self.db.execute("DELETE FROM changes WHERE subscription = ? AND id <= ?",
                            (stored.id, kept.trimmed))
            self.db.execute(
                "UPDATE subscriptions SET next_number = ?, trimmed = ?, last = ? WHERE id = ?",
                (diff.next_number, kept.trimmed, kept.last, stored.id))
        return kept

    def changes_after(self, sub: str, seen: int, limit: int) -> tuple[Kept, list[LoggedChange]]:
        """The kept window and up to ``limit`` changes after ``seen`` (any thread)."""
        with self._feed_lock:
            if self.closed:
                raise StoreClosed(self.path)
            self._feed.execute("BEGIN")
            try:
                found = self._feed.execute(
                    "SELECT trimmed, last FROM subscriptions WHERE id = ?", (sub,)).fetchone()
                changes = [] if found is None else [
                    LoggedChange(change_id, RowChange(kind, number, _values(row)))
                    for change_id, kind, number, row in self._feed.execute(
                        "SELECT id, kind, number, row FROM changes WHERE subscription = ? "
                        "AND id > ? ORDER BY id LIMIT ?", (sub, seen, limit))]
            finally:
                self._feed.execute("COMMIT")
        if found is None:
            raise KeyError(sub)
        return Kept(int(found[0]), int(found[1])), changes

    # ── inside ───────────────────────────────────────────────────────────────

    def _stored(self, sub: str, statement: str, tables: str, columns: str, next_number: int,
                trimmed: int, last: int) -> Stored:
        sql, params = json.loads(statement)
        return Stored(sub, Statement(sql=sql, params=params), frozenset(json.loads(tables)),
                      tuple(json.loads(columns)), int(next_number), Kept(int(trimmed), int(last)))

    @contextmanager
    def _tx(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
