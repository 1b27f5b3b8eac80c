"""The replica's storage: one SQLite file (WAL) per node, read locally and synchronously.

Reads are what every daemon does most (the broker ranks workers on every
create), so they are plain indexed queries on a local file: microseconds,
no network. Writes come from the replica core one transaction at a time,
rows and bookkeeping together, so a crash leaves both or neither.

Commits are ``synchronous = NORMAL``: in WAL mode a process crash loses
nothing, and a power loss can only lose the last commits, which peers send
back on the next sync. The registry is a cache of other nodes' truth
(DESIGN.md invariant 6), not a truth of its own.

``":memory:"`` gives a private in-memory view: the simulation runs hundreds
of replicas that way, on the same code as the daemons.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bodega.registry.replication.core.hlc import Stamp
from bodega.registry.replication.core.known import Known
from bodega.registry.replication.core.rows import Row
from bodega.registry.replication.core.schema import MIGRATIONS, TABLES, TableSpec
from bodega.runtime.sqlite import open_database

_COLUMNS = "_doc, _owner, _version, _hlc_wall, _hlc_logical"


def _spec(table: str) -> TableSpec:
    spec = TABLES.get(table)
    if spec is None:
        raise ValueError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
    return spec


def _row(table: str, key: str, doc: str | None, owner: str, version: int, wall: int,
         logical: int) -> Row:
    return Row(table, key, None if doc is None else json.loads(doc), owner, version,
               Stamp(wall, logical, owner))


class View:
    def __init__(self, path: Path | str, *, reader: bool = False) -> None:
        """``reader``: another process writes this file (the host's registry agent); this
        one only reads it, on a connection that refuses writes, and never migrates it."""
        self.path = path
        self.reader = reader
        if reader:
            self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA busy_timeout = 5000")
            self.db.execute("PRAGMA query_only = 1")
        else:
            # NORMAL: a replica is a cache that peers refill; losing its last commits to a
            # power cut costs a sync, not data.
            self.db = open_database(path, MIGRATIONS, synchronous="NORMAL")
        self._seq = self.last_seq()

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def tx(self) -> Iterator[None]:
        """Rows and bookkeeping together, or neither.

        A COMMIT can fail too (a full disk): the transaction is then still open, and is
        rolled back here so that the next one can begin."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    # ── rows ─────────────────────────────────────────────────────────────────

    def get(self, table: str, key: str) -> Row | None:
        spec = _spec(table)
        found = self.db.execute(
            f"SELECT {_COLUMNS} FROM {table} WHERE {spec.key} = ?", (key,)).fetchone()
        return None if found is None else _row(table, key, *found)

    def put(self, row: Row, now: float) -> None:
        spec = _spec(row.table)
        values = spec.indexed(row.key, row.doc or {})
        names = list(values)
        doc = None if row.doc is None else json.dumps(row.doc, separators=(",", ":"))
        self.db.execute(
            f"INSERT OR REPLACE INTO {row.table} "
            f"(_doc, _owner, _version, _hlc_wall, _hlc_logical, _deleted, _updated_at, _seq, "
            f"{', '.join(names)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?{', ?' * len(names)})",
            (doc, row.owner, row.version, row.stamp.wall_ms, row.stamp.logical,
             int(row.deleted), now, self._next_seq(), *values.values()))

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def last_seq(self) -> int:
        """The order number of the last row put here (one writer numbers them)."""
        return max(self.tops().values(), default=0)

    def tops(self) -> dict[str, int]:
        """Each table's last order number (0: nothing put in it yet)."""
        union = " UNION ALL ".join(f"SELECT '{name}', max(_seq) FROM {name}" for name in TABLES)
        return {str(table): int(top or 0) for table, top in self.db.execute(union)}

    def put_since(self, table: str, seq: int) -> list[tuple[int, Row]]:
        """Rows of ``table`` put here after order number ``seq``, tombstones included,
        with their numbers, in order."""
        spec = _spec(table)
        cursor = self.db.execute(
            f"SELECT _seq, {spec.key}, {_COLUMNS} FROM {table} WHERE _seq > ? ORDER BY _seq",
            (seq,))
        return [(int(found[0]), _row(table, *found[1:])) for found in cursor]

    def data_version(self) -> int:
        """Changes when another connection commits to the file (SQLite's data_version)."""
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def remove(self, table: str, key: str) -> None:
        self.db.execute(f"DELETE FROM {table} WHERE {_spec(table).key} = ?", (key,))

    def select(self, table: str, filters: Mapping[str, str | int], *,
               tombstones: bool = False,
               unless: Mapping[str, str | int] | None = None) -> list[Row]:
        """Rows whose indexed columns equal ``filters`` and differ from ``unless`` (live
        rows unless ``tombstones``); a row left out is never decoded."""
        spec = _spec(table)
        allowed = {spec.key, *spec.column_names}
        clauses = [] if tombstones else ["_deleted = 0"]
        params: list[Any] = []
        tests = [(name, value, "=") for name, value in filters.items()]
        tests += [(name, value, "IS NOT") for name, value in (unless or {}).items()]
        for name, value, test in tests:
            if name not in allowed:
                raise ValueError(f"{table} rows can be filtered on {', '.join(sorted(allowed))},"
                                 f" not {name!r}")
            clauses.append(f"{name} {test} ?")
            params.append(int(value) if isinstance(value, bool) else value)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        cursor = self.db.execute(
            f"SELECT {spec.key}, {_COLUMNS} FROM {table}{where} ORDER BY {spec.key}", params)
        return [_row(table, *found) for found in cursor]

    def count(self, table: str) -> int:
        return int(self.db.execute(
            f"SELECT count(*) FROM {_spec(table).name} WHERE _deleted = 0").fetchone()[0])

    def by_origin(self, origin: str, lo: int, hi: int, limit: int) -> list[Row]:
        """Rows last written by ``origin`` with a version in [lo, hi], oldest first."""
        union = " UNION ALL ".join(
            f"SELECT '{name}', {spec.key}, {_COLUMNS} FROM {name} "
            f"WHERE _owner = ?1 AND _version BETWEEN ?2 AND ?3" for name, spec in TABLES.items())
        cursor = self.db.execute(f"{union} ORDER BY 5 LIMIT ?4", (origin, lo, hi, limit))
        return [_row(*found) for found in cursor]

    def by_owner(self, origin: str) -> list[Row]:
        """Every row, live or not, last written by ``origin``."""
        rows: list[Row] = []
        for name, spec in TABLES.items():
            cursor = self.db.execute(
                f"SELECT {spec.key}, {_COLUMNS} FROM {name} WHERE _owner = ?", (origin,))
            rows.extend(_row(name, *found) for found in cursor)
        return rows

    def tombstones_before(self, when: float) -> list[Row]:
        rows: list[Row] = []
        for name, spec in TABLES.items():
            cursor = self.db.execute(
                f"SELECT {spec.key}, {_COLUMNS} FROM {name} WHERE _deleted = 1 AND _updated_at < ?",
                (when,))
            rows.extend(_row(name, *found) for found in cursor)
        return rows

    def all_rows(self) -> list[Row]:
        """Everything, tombstones included, in a stable order (tests compare replicas)."""
        return [row for table in TABLES for row in self.select(table, {}, tombstones=True)]

    # ── bookkeeping ──────────────────────────────────────────────────────────

    def origins(self) -> dict[str, tuple[Known, int]]:
        out: dict[str, tuple[Known, int]] = {}
        for origin, top, gaps, purged in self.db.execute(
                "SELECT origin, top, gaps, purged FROM origins"):
            spans = tuple((int(lo), int(hi)) for lo, hi in json.loads(gaps))
            out[origin] = (Known(int(top), spans), int(purged))
        return out

    def save_origin(self, origin: str, known: Known, purged: int) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO origins (origin, top, gaps, purged) VALUES (?, ?, ?, ?)",
            (origin, known.top, json.dumps([list(g) for g in known.gaps]), purged))

    def clock(self) -> tuple[int, int]:
        found = self.db.execute("SELECT wall, logical FROM clock WHERE id = 1").fetchone()
        return (0, 0) if found is None else (int(found[0]), int(found[1]))

    def save_clock(self, wall: int, logical: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO clock (id, wall, logical) VALUES (1, ?, ?)",
                        (wall, logical))
