"""The replication core: one node's replica, its writes, merges and sync decisions.

No sockets, no tasks, no timers: the shell (``node.py`` on UDP and HTTP,
``replsim.py`` on the simulated network) hands in remote rows and sync
messages and performs what comes back, so the same code is tested on
hundreds of simulated nodes and runs in every daemon.

    local write ──▶ view (one transaction: row, counter, clock) ──▶ Change(local)
                    (writes.py)                              shell broadcasts it
    rows from gossip or sync ──▶ validate ──▶ merge with what is held ──▶ view
                                  │ refused: counted, never applied    ──▶ Changes
    sync: the requests and replies, decided in exchange.py

What the replica believes it holds (the versions seen of every origin, and
the tombstone horizons) is its ``Ledger``, changed in the same transaction as
the rows it describes.

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
  ever reused; and until ``AUDIT_PEERS`` distinct peers have answered a
  sync (or every peer there is, if fewer) it asks for its own versions below
  that start as if unseen, so peers send any row of an earlier life, which
  it supersedes (with a tombstone when it no longer has the row). One
  answer is not enough: a peer that was wiped too, and took this life's
  floor from gossip before its own first sync, holds none of the earlier
  life's rows, yet vouches for every version below the floor. After a
  restart on its own view, a row of its own it has no record of (a lost
  tail) is handled the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager

from bodega.registry.membership.core.buckets import differing
from bodega.registry.replication.core import exchange
from bodega.registry.replication.core.exchange import (
    DigestReply,
    DigestRequest,
    SyncReply,
    SyncRequest,
)
from bodega.registry.replication.core.hlc import ClockDrift, HybridClock
from bodega.registry.replication.core.known import EMPTY, Known, Span
from bodega.registry.replication.core.ledger import Ledger
from bodega.registry.replication.core.rows import Change, Document, Row, generation, newer
from bodega.registry.replication.core.schema import TABLES
from bodega.registry.replication.core.validate import problem
from bodega.registry.replication.view import View
from bodega.registry.replication.writes import Writer, fresh_base

DEFAULT_MAX_ROWS = 2000  # rows per sync reply; the rest comes on the next round
AUDIT_PEERS = 3  # distinct peers whose answers end the audit of a wiped replica's past

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
        self._known = Ledger(name, {origin: known for origin, (known, _) in saved.items()},
                             {origin: purged for origin, (_, purged) in saved.items()})
        # On an empty view: the versions below are an earlier life's, to audit (see above).
        # They count as seen (there is nothing of this life there), but the node only
        # becomes an origin, in its own ledger and in its peers', when it first writes.
        self._past = 0
        if name not in self._known:
            self._past = fresh_base(self._wall())
        self._audited: set[str] = set()  # peers that answered the audit so far
        # The view holds what peers sent (it was not new, or a sync was applied since).
        self.settled = bool(saved)
        self._more = False
        wall_ms, logical = view.clock()
        self.clock = HybridClock(name, lambda: int(self._wall() * 1000), wall_ms=wall_ms,
                                 logical=logical)
        self._writer = Writer(name, view, self._known, self.clock, base=self._past, wall=wall)
        self.lost_tail = False  # a row of our own past was heard of: sync soon
        # Notices that opened a gap (only a pull fills one: sync soon), ever; how many of
        # them the last sync request was made after; how many a reply has answered.
        self._notices = self._asked = self._answered = 0

    # ── state ────────────────────────────────────────────────────────────────

    @property
    def counter(self) -> int:
        return self._writer.counter

    def known(self) -> dict[str, Known]:
        return self._known.copy()

    def known_of(self, origin: str) -> Known:
        return self._known.get(origin)

    def missing(self) -> dict[str, int]:
        """Origins with versions known to exist but not seen here, and how many."""
        return self._known.missing()

    def gaps(self) -> dict[str, tuple[Span, ...]]:
        """The unseen versions of each origin that has any."""
        return {origin: self._known.get(origin).gaps for origin in self._known.missing()}

    @property
    def urgent(self) -> bool:
        """Our own lost writes were heard of, a notice opened a gap (gossip will not fill
        it) or the last reply was cut at its row budget: the next look pulls."""
        return self.lost_tail or self._notices > self._answered or self._more

    @property
    def behind(self) -> bool:
        """Versions are known to be missing, our own lost ones were heard of, or the
        last reply was cut at its row budget."""
        return self._known.behind or self.urgent

    @property
    def floor(self) -> int:
        """Versions of ours below this hold nothing of this life (0: we kept our view)."""
        return self._writer.base

    @property
    def full_sync(self) -> bool:
        """The next pull should send every origin (it audits our own past)."""
        return bool(self._past)

    def horizon(self, origin: str) -> int:
        return self._known.horizon(origin)

    # ── local writes ─────────────────────────────────────────────────────────

    def write(self, table: str, key: str, doc: Document | None, *,
              shared: bool) -> Change | None:
        """Write (or, with ``doc`` None, delete) a row; None if nothing changes."""
        return self._writer.write(table, key, doc, shared=shared)

    def together(self) -> AbstractContextManager[None]:
        """The writes made inside commit together, or none of them (``Writer.together``)."""
        return self._writer.together()

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
        with self._known.journal(), self.view.tx():
            for origin in reset:
                if origin != self.name:
                    changes += self._reset(origin)
                    touched.add(origin)
            stale_own: list[Row] = []
            for row in rows:
                if not self._acceptable(row):
                    continue
                if row.owner == self.name:
                    if row.version <= self._past or row.version not in self._writer.mine():
                        stale_own.append(row)  # from a life of ours we have no record of
                    continue
                old = self.view.get(row.table, row.key)
                if old is not None and not row.shared and old.owner != row.owner \
                        and generation(row) == generation(old):
                    # An owned key changes hands only with a move, to a newer generation.
                    self._on_reject(row.table, "owner")
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
                self.lost_tail = False
                changes += self._writer.reassert(stale_own, now)
            for origin, spans in (vouched or {}).items():
                if spans:  # our own too: a peer vouching for our past has sent all it held
                    held = (self._writer.mine() if origin == self.name
                            else self._known.get(origin))
                    self._known.set(origin, held.add_spans(spans))
                    touched.add(origin)
            for origin, floor in (floors or {}).items():
                held = self._known.get(origin)
                if floor and origin != self.name and not held.covers(1, floor):
                    self._known.set(origin, held.add_span(1, floor))
                    touched.add(origin)
            for origin, purged in (horizons or {}).items():
                if self._known.raise_horizon(origin, purged):  # ours may lack what they purged
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
            if version not in self._writer.mine():
                self.lost_tail = True
            return
        before = self._known.get(origin)
        after = before.expect(version)
        if after != before:
            with self._known.journal(), self.view.tx():
                self._known.set(origin, after)
                self.view.save_origin(origin, after, self.horizon(origin))
            self._notices += 1

    def _reset(self, origin: str) -> list[Change]:
        changes = []
        for row in self.view.by_owner(origin):
            self.view.remove(row.table, row.key)
            changes.append(Change(row, None))
        self._known.set(origin, EMPTY)
        return changes

    # ── anti-entropy ─────────────────────────────────────────────────────────

    def digest_request(self) -> DigestRequest:
        return DigestRequest(self.name, self._known.digest())

    def compare(self, request: DigestRequest) -> DigestReply:
        """The buckets whose versions differ between ``request.sender`` and us."""
        return DigestReply(tuple(differing(self._known.digest(), request.digest)))

    def sync_request(self, buckets: tuple[int, ...] | None = None) -> SyncRequest:
        """Our versions of every origin, or of the origins in ``buckets`` only."""
        self._asked = self._notices
        return exchange.sync_request(self.name, self._known, buckets, past=self._past,
                                     counter=self.counter)

    def serve(self, request: SyncRequest, *, max_rows: int = DEFAULT_MAX_ROWS) -> SyncReply:
        """What ``request.sender`` is missing that we have, within ``max_rows``."""
        return exchange.serve(self._known, self.view, request, max_rows)

    def apply_reply(self, reply: SyncReply, *, peer: str = "", peers: int = 1
                    ) -> list[Change]:
        """Apply ``peer``'s answer to our sync request. ``peers``: how many distinct peers
        there are to ask; an audit of our past ends once ``AUDIT_PEERS`` of them (or all,
        if fewer) have sent what they held of it."""
        changes = self.apply(reply.rows, vouched=reply.vouched, reset=reply.reset,
                             horizons=reply.horizons)
        self.settled = True
        if self._past:
            self._audited.add(peer)
            if len(self._audited) >= min(AUDIT_PEERS, max(1, peers)):
                self._past = 0
                self._audited.clear()
        self._more = reply.more  # a catch-up in pages: pull the next one soon
        # Notices before the request are answered: their rows came, or the peer lacked
        # them too and GapWatch sees the gaps last; a later one still hurries.
        self._answered = max(self._answered, self._asked)
        return changes

    # ── housekeeping ─────────────────────────────────────────────────────────

    def purge(self) -> int:
        """Forget tombstones older than the TTL; how many went."""
        rows = self.view.tombstones_before(self._wall() - self.tombstone_ttl)
        if not rows:
            return 0
        with self._known.journal(), self.view.tx():
            for row in rows:
                self.view.remove(row.table, row.key)
                self._known.raise_horizon(row.owner, row.version)
            for origin in {row.owner for row in rows}:
                self.view.save_origin(origin, self._known.get(origin), self.horizon(origin))
        return len(rows)
