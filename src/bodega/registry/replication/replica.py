"""The replication core: one node's replica, its writes, merges and sync decisions.

No sockets, no tasks, no timers: the shell (``node.py`` on UDP and HTTP,
``replsim.py`` on the simulated network) hands in remote rows and sync
messages and performs what comes back, so the same code is tested on
hundreds of simulated nodes and runs in every daemon.

    local write ──▶ view (one transaction: row, counter, clock) ──▶ Change(local)
                                                             shell broadcasts it
    rows from gossip or sync ──▶ validate ──▶ merge with what is held ──▶ view
                                  │ refused: counted, never applied    ──▶ Changes
    sync: 1. compare digests (ledger.py): the peer names the buckets that differ
          2. request = my Known per origin of those buckets;
             reply = rows for need(theirs, mine) + the spans vouched for
                     + origins to reset + tombstone horizons

A node is an origin only once it writes: until then it has no entry in any
ledger, so a fleet of readers costs nothing to compare.

Two rare repairs keep replicas honest:

- **reset**: tombstones are purged after a TTL, so a replica that was away
  longer could still hold a row whose delete it never saw. A peer that purged
  tombstones of an origin (its *horizon*) tells a requester missing versions
  below that horizon to drop the origin's rows and take a fresh copy.
- **a lost past**: a node whose data dir was wiped (or whose last commits a
  power loss took) has rows out there it no longer knows. A replica that
  starts on an empty view numbers its writes from its wall clock in
  microseconds, above anything an earlier life reached, so no version is
  ever reused; and until its first sync completes it asks for its own
  versions below that start as if unseen, so peers send any row of an
  earlier life, which it supersedes (with a tombstone when it no longer has
  the row). After a restart on its own view, a row of its own it has no
  record of (a lost tail) is handled the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from bodega.registry.buckets import differing
from bodega.registry.replication.exchange import DigestReply as DigestReply
from bodega.registry.replication.exchange import DigestRequest as DigestRequest
from bodega.registry.replication.exchange import SyncReply as SyncReply
from bodega.registry.replication.exchange import SyncRequest as SyncRequest
from bodega.registry.replication.hlc import ClockDrift, HybridClock
from bodega.registry.replication.known import EMPTY, Known, Span, need
from bodega.registry.replication.ledger import Ledger
from bodega.registry.replication.rows import Row, newer
from bodega.registry.replication.schema import TABLES, Kind
from bodega.registry.replication.validate import problem
from bodega.registry.replication.view import View

DEFAULT_MAX_ROWS = 2000  # rows per sync reply; the rest comes on the next round


def fresh_base(wall: float) -> int:
    """Where a new (or wiped) replica starts numbering its writes: above any past life's.

    Microseconds of wall time: no life writes a million rows a second, and the
    figure stays under 2**53 (exact as a JSON number everywhere) for two
    centuries.
    """
    return max(0, int(wall * 1_000_000))


class InvalidRow(ValueError):
    """A local write that breaks the table's rules (a bug in the writer, not in a peer)."""


@dataclass(frozen=True)
class Change:
    """A row this replica now holds differently; ``new`` None: it was dropped (reset)."""

    old: Row | None
    new: Row | None
    local: bool = False  # written by this node: the shell broadcasts it


Rejected = Callable[[str, str], None]  # (table, reason)


class Replica:
    def __init__(self, name: str, view: View, *, wall: Callable[[], float] = time.time,
                 tombstone_ttl: float = 3600.0, on_reject: Rejected | None = None) -> None:
        self.name = name
        self.view = view
        self.tombstone_ttl = tombstone_ttl
        self._wall = wall
        self._on_reject = on_reject or (lambda _table, _reason: None)
        saved = view.origins()
        self._known = Ledger(name, {origin: known for origin, (known, _) in saved.items()})
        self._horizon = {origin: purged for origin, (_, purged) in saved.items() if purged}
        # On an empty view: the versions below are an earlier life's, to audit (see above).
        # They count as seen (there is nothing of this life there), but the node only
        # becomes an origin, in its own ledger and in its peers', when it first writes.
        self._past = 0
        if name not in self._known:
            self._past = fresh_base(self._wall())
        self._base = self._past
        self._more = False
        wall_ms, logical = view.clock()
        self.clock = HybridClock(name, lambda: int(self._wall() * 1000), wall_ms=wall_ms,
                                 logical=logical)
        self.lost_tail = False  # a row of our own past was heard of: sync soon

    # ── state ────────────────────────────────────────────────────────────────

    @property
    def counter(self) -> int:
        return self._mine().top

    def _mine(self) -> Known:
        mine = self._known.get(self.name)
        return mine if mine.top >= self._base else Known(self._base)

    def known(self) -> dict[str, Known]:
        return self._known.copy()

    def known_of(self, origin: str) -> Known:
        return self._known.get(origin)

    def missing(self) -> dict[str, int]:
        """Origins with versions known to exist but not seen here, and how many."""
        return self._known.missing()

    @property
    def behind(self) -> bool:
        """Versions are known to be missing, our own lost ones were heard of, or the
        last reply was cut at its row budget."""
        return self._known.behind or self.lost_tail or self._more

    @property
    def floor(self) -> int:
        """Versions of ours below this hold nothing of this life (0: we kept our view)."""
        return self._base

    @property
    def full_sync(self) -> bool:
        """The next pull should send every origin (it audits our own past)."""
        return bool(self._past)

    def horizon(self, origin: str) -> int:
        return self._horizon.get(origin, 0)

    @contextmanager
    def _tx(self) -> Iterator[None]:
        """A view transaction whose bookkeeping here rolls back with it.

        What this replica believes it holds (``_known``, ``_horizon``) is changed inside
        the transaction that stores the rows; if that fails (a full disk), believing it
        anyway would make this replica vouch for rows it never stored and stop asking for
        them: it would never converge."""
        horizon = dict(self._horizon)
        try:
            with self._known.journal(), self.view.tx():
                yield
        except BaseException:
            self._horizon = horizon
            raise

    # ── local writes ─────────────────────────────────────────────────────────

    def write(self, table: str, key: str, doc: dict[str, Any] | None, *,
              shared: bool) -> Change | None:
        """Write (or, with ``doc`` None, delete) a row; None if nothing changes."""
        spec = TABLES.get(table)
        if spec is None:
            raise ValueError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        if (spec.kind is Kind.SHARED) != shared:
            raise ValueError(f"{table} is a {spec.kind} table: use put_{spec.kind}/"
                             f"delete_{spec.kind}")
        old = self.view.get(table, key)
        if not shared and old is not None and old.owner != self.name:
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
        with self._tx():
            self.view.put(row, self._wall())
            self._own(row.version)
        return Change(old, row, local=True)

    def _own(self, version: int) -> None:
        """Our counter is now ``version``: saved with the write that used it."""
        self._known.set(self.name, self._mine().add(version))
        self.view.save_origin(self.name, self._mine(), self.horizon(self.name))
        self.view.save_clock(*self.clock.last)

    # ── remote rows ──────────────────────────────────────────────────────────

    def apply(self, rows: Iterable[Row], *, vouched: dict[str, list[Span]] | None = None,
              reset: Iterable[str] = (), horizons: dict[str, int] | None = None,
              floors: dict[str, int] | None = None) -> list[Change]:
        """Merge rows from a peer in one transaction; what changed here.

        ``vouched`` is None for rows that came by gossip, and the spans a peer
        vouched for when they came by sync. ``floors``: origins' versions below
        which nothing of their current life lies (carried on gossip items).
        """
        changes: list[Change] = []
        touched: set[str] = set()
        now = self._wall()
        with self._tx():
            for origin in reset:
                if origin != self.name:
                    changes += self._reset(origin)
                    touched.add(origin)
            stale_own: list[Row] = []
            for row in rows:
                if not self._acceptable(row):
                    continue
                if row.owner == self.name:
                    if row.version <= self._past or row.version not in self._mine():
                        stale_own.append(row)  # from a life of ours we have no record of
                    continue
                old = self.view.get(row.table, row.key)
                if old is not None and not row.shared and old.owner != row.owner:
                    self._on_reject(row.table, "owner")  # an owned key never changes hands
                    continue
                touched.add(row.owner)
                self._known.set(row.owner, self._known.get(row.owner).add(row.version))
                if old is None or newer(row, old):
                    self.view.put(row, now)
                    changes.append(Change(old, row))
            if stale_own and vouched is None:
                # Gossip brings one stale row at a time; sync serves them all at once.
                self.lost_tail = True
            elif stale_own:
                changes += self._reassert(stale_own, now)
            for origin, spans in (vouched or {}).items():
                if spans:  # our own too: a peer vouching for our past has sent all it held
                    held = self._mine() if origin == self.name else self._known.get(origin)
                    self._known.set(origin, held.add_spans(spans))
                    touched.add(origin)
            for origin, floor in (floors or {}).items():
                held = self._known.get(origin)
                if floor and origin != self.name and not held.covers(1, floor):
                    self._known.set(origin, held.add_span(1, floor))
                    touched.add(origin)
            for origin, purged in (horizons or {}).items():
                if purged > self._horizon.get(origin, 0):
                    self._horizon[origin] = purged  # our copy may lack what they purged
                    touched.add(origin)
            for origin in touched:
                self.view.save_origin(origin, self._known.get(origin), self.horizon(origin))
            self.view.save_clock(*self.clock.last)
        return changes

    def _acceptable(self, row: Row) -> bool:
        reason = problem(row)
        if reason is None and row.shared:
            try:
                self.clock.check(row.stamp)
            except ClockDrift:
                reason = "clock"
        if reason is not None:
            self._on_reject(row.table if row.table in TABLES else "unknown", reason)
            return False
        if row.shared:
            self.clock.observe(row.stamp)
        return True

    def notice(self, origin: str, version: int) -> None:
        """A peer says ``origin`` wrote ``version`` (its row was too large to gossip)."""
        if origin == self.name:
            if version not in self._mine():
                self.lost_tail = True
            return
        before = self._known.get(origin)
        after = before.expect(version)
        if after != before:
            with self._tx():
                self._known.set(origin, after)
                self.view.save_origin(origin, after, self.horizon(origin))

    def _reset(self, origin: str) -> list[Change]:
        changes = []
        for row in self.view.by_owner(origin):
            self.view.remove(row.table, row.key)
            changes.append(Change(row, None))
        self._known.set(origin, EMPTY)
        return changes

    def _reassert(self, stale: list[Row], now: float) -> list[Change]:
        """Our own rows from a past we have no record of: make what we hold now win."""
        self.lost_tail = False
        own = self._mine()
        for row in stale:
            own = own.add(row.version)  # never reuse a version a peer has seen
        self._known.set(self.name, own)
        changes = []
        for row in stale:
            held = self.view.get(row.table, row.key)
            if row.shared:
                if held is None or newer(row, held):
                    self.view.put(row, now)
                    changes.append(Change(held, row))
                continue
            if held is not None and held.owner == self.name and newer(held, row):
                continue  # what we hold already supersedes it everywhere
            doc = held.doc if held is not None and held.owner == self.name else None
            fresh = Row(row.table, row.key, doc, self.name, self.counter + 1, self.clock.tick())
            self.view.put(fresh, now)
            self._known.set(self.name, self._mine().add(fresh.version))
            changes.append(Change(held, fresh, local=True))
        self._own(self.counter)
        return changes

    # ── anti-entropy ─────────────────────────────────────────────────────────

    def digest_request(self) -> DigestRequest:
        return DigestRequest(self.name, self._known.digest())

    def compare(self, request: DigestRequest) -> DigestReply:
        """The buckets whose versions differ between ``request.sender`` and us."""
        return DigestReply(tuple(differing(self._known.digest(), request.digest)))

    def sync_request(self, buckets: tuple[int, ...] | None = None) -> SyncRequest:
        """Our versions of every origin, or of the origins in ``buckets`` only."""
        if buckets is None or self._past:
            known = self._known.copy()
            buckets = None
        else:
            known = {o: self._known.get(o) for o in self._known.origins_in(buckets)}
        if self._past:  # ask for our own past: peers send what an earlier life left
            known[self.name] = Known(self.counter, ((1, self._past),))
        return SyncRequest(self.name, known, buckets)

    def serve(self, request: SyncRequest, *, max_rows: int = DEFAULT_MAX_ROWS) -> SyncReply:
        """What ``request.sender`` is missing that we have, within ``max_rows``.

        An origin to reset, and the sender's own origin (it lost writes), are
        served whole whatever the budget: a partial copy would not converge.
        """
        reply = SyncReply()
        budget = max_rows
        more = False
        origins = (list(self._known.origins_in(request.buckets))
                   if request.buckets is not None else sorted(o for o, _ in self._known.items()))
        for origin in origins:
            mine = self._known.get(origin)
            theirs = request.known.get(origin, EMPTY)
            purged = self._horizon.get(origin, 0)
            if purged and theirs.top and not theirs.covers(1, purged) \
                    and origin != request.sender:
                reply.reset.append(origin)
                theirs = EMPTY
            spans = need(theirs, mine)
            if not spans:
                continue
            if purged:
                reply.horizons[origin] = purged
            whole = origin in reply.reset or origin == request.sender
            vouched: list[Span] = []
            for lo, hi in spans:
                limit = 2**62 if whole else budget
                if limit <= 0:
                    more = True
                    break
                rows = self.view.by_origin(origin, lo, hi, limit + 1)
                if len(rows) > limit:
                    rows = rows[:limit]
                    vouched.append((lo, rows[-1].version))
                    more = True
                else:
                    vouched.append((lo, hi))
                reply.rows.extend(rows)
                budget -= len(rows)
            if vouched:
                reply.vouched[origin] = vouched
        return replace(reply, more=True) if more else reply

    def apply_reply(self, reply: SyncReply) -> list[Change]:
        changes = self.apply(reply.rows, vouched=reply.vouched, reset=reply.reset,
                             horizons=reply.horizons)
        self._past = 0  # a peer sent whatever it held of our past: the audit is done
        self._more = reply.more  # a catch-up in pages: pull the next one soon
        return changes

    # ── housekeeping ─────────────────────────────────────────────────────────

    def purge(self) -> int:
        """Forget tombstones older than the TTL; how many went."""
        rows = self.view.tombstones_before(self._wall() - self.tombstone_ttl)
        if not rows:
            return 0
        with self._tx():
            for row in rows:
                self.view.remove(row.table, row.key)
                self._horizon[row.owner] = max(self._horizon.get(row.owner, 0), row.version)
            for origin in {row.owner for row in rows}:
                self.view.save_origin(origin, self._known.get(origin), self._horizon[origin])
        return len(rows)
