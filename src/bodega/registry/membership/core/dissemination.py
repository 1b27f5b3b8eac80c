"""SWIM's dissemination: what this node sends to whom, besides probes, and when.

Every packet carries piggybacked news (``broadcasts.py``: member updates
and items, least-sent first). On its own cadence a node also gossips to a
few members (every ``gossip_interval``, when news is pending), runs a
push-pull with one live member (a digest of its member table,
``memberdigest.py``: the peer answers with its records in the buckets that
differ and asks for ours there), and announces itself to a few dead members
so a healed partition merges. A joiner says hello to its seeds, with
backoff, until one answers with the whole table.
"""

from __future__ import annotations

import math
import random

from bodega.registry.membership.core.broadcasts import Piggyback
from bodega.registry.membership.core.buckets import Digest, bucket_of, differing
from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import Addr, MemberRecord, Status
from bodega.registry.membership.core.messages import Body, Message, Sync
from bodega.registry.membership.core.outputs import Out, Send
from bodega.registry.membership.core.table import MemberTable


class Dissemination:
    def __init__(self, name: str, config: SwimConfig, rng: random.Random, table: MemberTable,
                 piggyback: Piggyback) -> None:
        self.name = name
        self.config = config
        self._rng = rng
        self._table = table
        self._piggyback = piggyback
        self._next_gossip = self._next_push_pull = self._next_dead_announce = 0.0
        self._seeds: list[Addr] = []
        self._join_retry_at: float | None = None
        self._join_backoff = config.join_retry_interval

    def set_phase(self, now: float) -> None:
        c = self.config
        self._next_gossip = now + self._rng.uniform(0, c.gossip_interval)
        self._next_push_pull = (now + self._rng.uniform(0.5, 1.0)
                                * c.push_pull_period(self._table.live))
        self._next_dead_announce = now + self._rng.uniform(0, c.dead_announce_interval)

    def send(self, addr: Addr, body: Body, lead: MemberRecord | None = None) -> Send:
        """One packet to ``addr``: ``body`` with as much pending news as fits (``lead`` first)."""
        limit = self.config.retransmit_limit(self._table.live)
        return Send(addr, self._piggyback.message(self.name, body, limit, lead))

    def next_due(self, *, leaving: bool, joined: bool) -> float:
        """When ``due`` or ``retry_join`` next has something to do (gossip only while news
        is pending)."""
        due = self._next_gossip if self._piggyback.pending else math.inf
        if not leaving:
            due = min(due, self._next_push_pull, self._next_dead_announce)
        if not joined and self._join_retry_at is not None:
            due = min(due, self._join_retry_at)
        return due

    def due(self, now: float, me: MemberRecord, *, leaving: bool) -> list[Out]:
        """The push-pull, announcements to the dead and gossip whose time has come."""
        out: list[Out] = []
        if not leaving:
            if now >= self._next_push_pull:
                self._next_push_pull = now + self.config.push_pull_period(self._table.live)
                self._table.reap(now)
                self._push_pull(me, out)
            if now >= self._next_dead_announce:
                self._next_dead_announce = now + self.config.dead_announce_interval
                self._announce_to_dead(me, out)
        if now >= self._next_gossip:
            self._next_gossip += self.config.gossip_interval
            if self._next_gossip <= now:  # fell behind (a stalled loop): resume the cadence
                self._next_gossip = now + self.config.gossip_interval
            out += self.gossip(now)
        return out

    def gossip(self, now: float) -> list[Out]:
        """Pending news to a few live members (and members recently dead, so they hear)."""
        if not self._piggyback.pending:
            return []
        horizon = now - self.config.gossip_to_the_dead_time
        recent = [n for n in self._table.by_status[Status.DEAD].names
                  if self._table.since(n) >= horizon]
        out: list[Out] = []
        for target in self._table.sample(self._rng, self.config.gossip_nodes, Status.ALIVE,
                                         Status.SUSPECT, extra=recent):
            send = self.send(target.addr, None)
            if send.message.updates or send.message.items:
                out.append(send)
        return out

    def join(self, now: float, me: MemberRecord, seeds: list[Addr]) -> list[Out]:
        """Hellos to ``seeds``, retried with backoff (``retry_join``) until one answers."""
        self._seeds = seeds
        if not seeds:
            return []
        self._join_backoff = self.config.join_retry_interval
        self._join_retry_at = now + self._join_backoff
        return self._hello(me)

    def retry_join(self, now: float, me: MemberRecord) -> list[Out]:
        if self._join_retry_at is None or now < self._join_retry_at:
            return []
        self._join_backoff = min(self._join_backoff * 2, self.config.join_retry_max)
        self._join_retry_at = now + self._join_backoff
        return self._hello(me)

    def answer_push_pull(self, me: MemberRecord, addr: Addr, digest: Digest) -> list[Out]:
        """Our records in the buckets whose digests differ, asking for theirs there."""
        differ = differing(self._table.digest.digest(me), digest)
        if not differ:
            return []
        return self.sync(me, addr, buckets=differ, want=differ)

    def sync(self, me: MemberRecord, addr: Addr, *,
             buckets: list[int] | tuple[int, ...] | None = None,
             want: list[int] | tuple[int, ...] = ()) -> list[Out]:
        """Our member table to ``addr``: whole (a join), or the buckets a push-pull found
        different (``memberdigest.py``), asking for the peer's records in ``want``."""
        if buckets is None:
            records = [me, *self._table]
        else:
            mine = [me] if bucket_of(self.name) in buckets else []
            records = mine + [r for n in self._table.digest.names_in(buckets)
                              if (r := self._table.get(n)) is not None]
        # Always an answer (to a hello, a push-pull or a want): it asks for none back.
        messages = self._piggyback.sync_messages(self.name, records, reply=False,
                                                 want=tuple(want))
        return [Send(addr, m) for m in messages]

    def _hello(self, me: MemberRecord) -> list[Out]:
        return [Send(a, Message(self.name, Sync((me,), True))) for a in self._seeds]

    def _push_pull(self, me: MemberRecord, out: list[Out]) -> None:
        digest = self._table.digest.digest(me)
        for peer in self._table.sample(self._rng, 1, Status.ALIVE):
            out.append(Send(peer.addr, Message(self.name, Sync((me,), True, digest))))

    def _announce_to_dead(self, me: MemberRecord, out: list[Out]) -> None:
        for record in self._table.sample(self._rng, self.config.dead_announce_nodes, Status.DEAD):
            out.append(Send(record.addr, Message(self.name, Sync((me, record), True))))
