"""This node's own rows: local writes, numbered from its counter, and rows re-asserted.

Every write a node makes takes the next number of its own counter, its
*version*, whatever the table, saved in the same transaction as the row, so
a restart continues above it. A replica that starts on an empty view (a new
node, or one whose data dir was wiped) numbers from ``fresh_base``, its wall
clock in microseconds, above anything an earlier life reached: no version
is ever reused.

When rows of an earlier life of ours turn up (``replica.py``, a lost past),
``reassert`` makes what this node holds now win over them everywhere: each
gets a fresh version of ours, with the document held now or as a tombstone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext

from bodega.registry.replication.core.hlc import HybridClock
from bodega.registry.replication.core.known import Known
from bodega.registry.replication.core.ledger import Ledger
from bodega.registry.replication.core.rows import (
    Change,
    Document,
    Row,
    generation,
    generation_of,
    newer,
)
from bodega.registry.replication.core.schema import TABLES, Kind
from bodega.registry.replication.core.validate import problem
from bodega.registry.replication.view import View


def fresh_base(wall: float) -> int:
    """Where a new (or wiped) replica starts numbering its writes: above any past life's.

    Microseconds of wall time: no life writes a million rows a second, and the
    figure stays under 2**53 (exact as a JSON number everywhere) for two
    centuries.
    """
    return max(0, int(wall * 1_000_000))


class InvalidRow(ValueError):
    """A local write that breaks the table's rules (a bug in the writer, not in a peer)."""


class Writer:
    def __init__(self, name: str, view: View, ledger: Ledger, clock: HybridClock, *,
                 base: int, wall: Callable[[], float]) -> None:
        self.name = name
        self.view = view
        self.clock = clock
        self.base = base  # versions of ours below it hold nothing of this life
        self._ledger = ledger
        self._wall = wall
        # Inside ``together``: what ends the batch's transaction, begun at its first write.
        self._batch: ExitStack | None = None
        self._begun = False

    @contextmanager
    def together(self) -> Iterator[None]:
        """The writes made inside in one transaction: all of them, or none (and their
        versions taken back) if the block raises. One commit for a batch of rows, where
        each write alone makes its own; none at all for a batch that writes nothing."""
        if self._batch is not None:
            yield
            return
        with ExitStack() as batch:
            self._batch, self._begun = batch, False
            try:
                yield
            finally:
                self._batch = None

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._ledger.journal(), self.view.tx():
            yield

    @property
    def counter(self) -> int:
        return self.mine().top

    def mine(self) -> Known:
        """Our own versions seen; everything below the base counts as seen."""
        mine = self._ledger.get(self.name)
        return mine if mine.top >= self.base else Known(self.base)

    def write(self, table: str, key: str, doc: Document | None, *,
              shared: bool) -> Change | None:
        """Write (or, with ``doc`` None, delete) a row; None if nothing changes."""
        spec = TABLES.get(table)
        if spec is None:
            raise ValueError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        if (spec.kind is Kind.SHARED) != shared:
            raise ValueError(f"{table} is a {spec.kind} table: use put_{spec.kind}/"
                             f"delete_{spec.kind}")
        old = self.view.get(table, key)
        if not shared and old is not None and old.owner != self.name \
                and generation_of(table, doc) <= generation(old):  # a move hands it over
            raise InvalidRow(f"{table}/{key} belongs to {old.owner}, not {self.name}")
        if doc is None:
            if old is None and not shared:
                return None  # owned and never written: nothing to delete
            if old is not None and old.deleted:
                return None
        elif old is not None and old.doc == doc and (shared or old.owner == self.name):
            return None
        row = Row(table, key, doc, self.name, self.counter + 1, self.clock.tick())
        reason = problem(row)
        if reason is not None:
            raise InvalidRow(f"{table}/{key}: {reason}")
        if self._batch is not None and not self._begun:
            self._batch.enter_context(self._transaction())  # ends with the batch
            self._begun = True
        with nullcontext() if self._batch is not None else self._transaction():
            self.view.put(row, self._wall())
            self.own(row.version)
        return Change(old, row, local=True)

    def own(self, version: int) -> None:
        """Our counter is now ``version``: saved with the write that used it."""
        self._ledger.set(self.name, self.mine().add(version))
        self.view.save_origin(self.name, self.mine(), self._ledger.horizon(self.name))
        self.view.save_clock(*self.clock.last)

    def reassert(self, stale: list[Row], now: float) -> list[Change]:
        """Our own rows from a past we have no record of: make what we hold now win.

        Runs inside the caller's transaction."""
        own = self.mine()
        for row in stale:
            own = own.add(row.version)  # never reuse a version a peer has seen
        self._ledger.set(self.name, own)
        changes = []
        for row in stale:
            held = self.view.get(row.table, row.key)
            if row.shared:
                if held is None or newer(row, held):
                    self.view.put(row, now)
                    changes.append(Change(held, row))
                continue
            if held is not None and newer(held, row) and (
                    held.owner == self.name or generation(held) > generation(row)):
                continue  # what we hold already supersedes it everywhere (a moved machine's)
            doc = held.doc if held is not None and held.owner == self.name else None
            fresh = Row(row.table, row.key, doc, self.name, self.counter + 1, self.clock.tick())
            self.view.put(fresh, now)
            self._ledger.set(self.name, self.mine().add(fresh.version))
            changes.append(Change(held, fresh, local=True))
        self.own(self.counter)
        return changes
