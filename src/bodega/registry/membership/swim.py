"""SWIM membership with Lifeguard, as a pure state machine.

No sockets, no clock, no tasks: the driver calls ``tick(now)`` often (every
50-100 ms), hands in every decoded packet with ``receive(now, addr, msg)``,
and performs the ``Send``s it gets back; ``Event``s and ``Delivered`` items go
to listeners. Every timer is a deadline checked in ``tick``; every random
choice comes from the injected ``random.Random``. The same code runs on real
UDP (``membership.py``) and on the simulated network (``simnet.py``).

Per tick, in order: join retries, expired suspicions, relay nacks, the probe
round (see ``probes.py``), push-pull, announcements to dead members, gossip.
Membership rules live in ``members.py`` (precedence), ``table.py`` (what
this node knows) and ``suspicion.py`` (timeouts, local health); what rides
on packets in ``broadcasts.py``.
"""

from __future__ import annotations

import random
from dataclasses import replace

from bodega.registry.buckets import bucket_of, differing
from bodega.registry.membership.broadcasts import Piggyback
from bodega.registry.membership.config import SwimConfig
from bodega.registry.membership.members import (
    Addr,
    MemberRecord,
    MemberView,
    Role,
    Status,
    check_identity,
)
from bodega.registry.membership.messages import (
    Ack,
    Body,
    Direct,
    Item,
    Message,
    Nack,
    Ping,
    PingReq,
    Sync,
)
from bodega.registry.membership.outputs import (
    Delivered,
    Event,
    Out,
    Send,
    SwimStats,
    UnknownMember,
)
from bodega.registry.membership.probes import Probe, ProbeOrder, Relay
from bodega.registry.membership.suspicion import LocalHealth
from bodega.registry.membership.table import Change, MemberTable


class Swim:
    def __init__(self, name: str, addr: Addr, role: Role | str, region: str,
                 meta: dict[str, str] | None = None, *, generation: int = 1,
                 config: SwimConfig | None = None, rng: random.Random | None = None) -> None:
        meta = dict(meta or {})
        check_identity(name, addr, region, meta)
        self.config = config or SwimConfig()
        self._rng = rng or random.Random()
        self._self = MemberRecord(name, addr, Role(role), region, meta, 0, generation)
        self._table = MemberTable(self.config)
        self.piggyback = Piggyback(self.config)
        self._health = LocalHealth(self.config.max_health_score)
        self._order = ProbeOrder(self._rng)
        self._probe: Probe | None = None
        self._relays: dict[int, Relay] = {}
        self._seq = 0
        self._now = 0.0
        self._timers_set = False
        self._next_probe = self._next_gossip = self._next_push_pull = 0.0
        self._next_dead_announce = 0.0
        self._lag_counted = False
        self._seeds: list[Addr] = []
        self._join_retry_at: float | None = None
        self._join_backoff = self.config.join_retry_interval
        self.joined = False
        self.leaving = False
        self.stats = SwimStats()
        self._members: tuple[int, MemberRecord, list[MemberView]] | None = None

    # ── what the node is and sees ────────────────────────────────────────────

    @property
    def name(self) -> str:
        return self._self.name

    @property
    def local(self) -> MemberView:
        return MemberView.of(self._self)

    @property
    def generation(self) -> int:
        return self._self.generation

    @property
    def incarnation(self) -> int:
        return self._self.incarnation

    @property
    def health(self) -> int:
        """Lifeguard's local health score: 0 is healthy, timeouts scale by score + 1."""
        return self._health.score

    @property
    def n(self) -> int:
        return self._table.live

    def alive_names(self) -> list[str]:
        """Names of the other members now alive; shared, do not change (O(1))."""
        return self._table.by_status[Status.ALIVE].names

    def members(self) -> list[MemberView]:
        """Every member, ourselves included, sorted by name (built once per change)."""
        cached = self._members
        if cached is None or cached[0] != self._table.version or cached[1] is not self._self:
            records = [self._self, *self._table]
            views = sorted((MemberView.of(r) for r in records), key=lambda v: v.name)
            cached = self._members = (self._table.version, self._self, views)
        return list(cached[2])

    def member(self, name: str) -> MemberView | None:
        record = self._self if name == self.name else self._table.get(name)
        return None if record is None else MemberView.of(record)

    @property
    def record(self) -> MemberRecord:
        return self._self

    def restore(self, now: float, records: list[MemberRecord]) -> None:
        """Know these members already (a warm start), without gossiping them as news.

        For simulations that measure a settled cluster of thousands: a real
        join has every node hear of every other, N² records, before anything
        can be measured.
        """
        self._start(now)
        for record in records:
            if (record.name != self.name and self._table.apply(now, record) is not None
                    and record.status.live):
                self._order.add(record.name)
        self.joined = True

    def suspicion_deadline(self, name: str) -> float | None:
        s = self._table.suspicion(name)
        return None if s is None else s.deadline

    # ── commands ─────────────────────────────────────────────────────────────

    def join(self, now: float, seeds: list[Addr]) -> list[Out]:
        """Contact seeds (retried with backoff until one answers with its table)."""
        self._start(now)
        self._seeds = [a for a in dict.fromkeys(seeds) if a != self._self.addr]
        if not self._seeds:
            self.joined = True
            return []
        self.joined = False
        self._join_backoff = self.config.join_retry_interval
        self._join_retry_at = now + self._join_backoff
        return self._hello(self._seeds)

    def leave(self, now: float) -> list[Out]:
        """Announce a graceful leave; keep ticking a little so the news spreads."""
        self._start(now)
        self.leaving = True
        self._probe = None
        self._self = self._self.with_status(Status.LEFT, by=self.name)
        self._queue_update(self._self)
        return self._gossip(now)

    def update_meta(self, meta: dict[str, str]) -> None:
        """New metadata for ourselves: a higher incarnation makes it win everywhere."""
        check_identity(self.name, self._self.addr, self._self.region, meta)
        self._self = replace(self._self, meta=dict(meta), incarnation=self.incarnation + 1)
        self._queue_update(self._self)

    def note_loop_lag(self, seconds: float) -> None:
        """Our event loop ran ``seconds`` late: Lifeguard counts that against our own health."""
        if seconds >= self.config.loop_lag_threshold and not self._lag_counted:
            self._lag_counted = True  # once per probe round, like a failed probe
            self._health.apply(1)

    def broadcast(self, item: Item) -> None:
        """Queue ``item`` to ride on outgoing packets until sent ``retransmit_limit`` times.

        Members that receive it deliver it once and pass it on the same way, so
        it spreads epidemically. A key already queued here is replaced.
        """
        self.piggyback.queue_item(self._now, self.name, item)

    def send_direct(self, now: float, name: str, item: Item) -> list[Out]:
        """One packet carrying ``item`` to member ``name``; delivered there, not re-broadcast."""
        self._start(now)
        record = self._table.get(name)
        if record is None:
            raise UnknownMember(name)
        self.piggyback.check_direct(self.name, item)
        return [self._send(record.addr, Direct(item))]

    # ── driving ──────────────────────────────────────────────────────────────

    def tick(self, now: float) -> list[Out]:
        self._start(now)
        out: list[Out] = []
        if not self.joined and self._join_retry_at is not None and now >= self._join_retry_at:
            self._join_backoff = min(self._join_backoff * 2, self.config.join_retry_max)
            self._join_retry_at = now + self._join_backoff
            out += self._hello(self._seeds)
        for change in self._table.expire(now, self.name):
            self.stats.deaths += 1
            self._accepted(change, out)
        self._run_relays(now, out)
        if not self.leaving:
            self._run_probe(now, out)
            if now >= self._next_push_pull:
                self._next_push_pull = now + self.config.push_pull_period(self.n)
                self._table.reap(now)
                self._push_pull(out)
            if now >= self._next_dead_announce:
                self._next_dead_announce = now + self.config.dead_announce_interval
                self._announce_to_dead(out)
        if now >= self._next_gossip:
            self._next_gossip += self.config.gossip_interval
            if self._next_gossip <= now:  # fell behind (a stalled loop): resume the cadence
                self._next_gossip = now + self.config.gossip_interval
            out += self._gossip(now)
        return out

    def receive(self, now: float, sender: Addr, message: Message) -> list[Out]:
        self._start(now)
        out: list[Out] = []
        for record in message.updates:
            self._apply(now, record, out)
        for item in message.items:
            self._deliver(now, item, message.sender, out)
        match message.body:
            case Ping(seq, target) if target == self.name:
                out.append(self._send(sender, Ack(seq)))
            case Ack(seq):
                self._on_ack(seq, out)
            case Nack(seq):
                if self._probe is not None and self._probe.seq == seq:
                    self._probe.nacks += 1
            case PingReq() as req:
                self._relay(now, sender, req, out)
            case Sync(records, reply, digest, want):
                for record in records:
                    self._apply(now, record, out)
                if digest is not None:  # a push-pull: send what differs, ask for theirs
                    differ = differing(self._table.digest.digest(self._self), digest)
                    if differ:
                        out += self._sync(sender, reply=False, buckets=differ, want=differ)
                elif reply:
                    out += self._sync(sender, reply=False)
                else:
                    self.joined = True
                if want:
                    out += self._sync(sender, reply=False, buckets=want)
            case Direct(item):
                self.stats.items_delivered += 1
                out.append(Delivered(item, message.sender, direct=True))
            case _:
                pass
        return out

    # ── membership rules ─────────────────────────────────────────────────────

    def _apply(self, now: float, record: MemberRecord, out: list[Out]) -> None:
        if record.name == self.name:
            self._about_me(record)
            return
        change = self._table.apply(now, record)
        if change is not None:
            self._accepted(change, out)

    def _accepted(self, change: Change, out: list[Out]) -> None:
        if change.new.status.live:
            self._order.add(change.new.name)
        self._queue_update(change.new)
        kind = change.kind
        if kind is not None:
            out.append(Event(kind, MemberView.of(change.new)))

    def _about_me(self, record: MemberRecord) -> None:
        me = self._self
        if self.leaving or record.generation < me.generation:
            return
        if record.generation > me.generation:
            self._renew(record.generation + 1)  # our generation counter was lost
        elif not record.status.live:
            self._renew(me.generation + 1)  # declared dead: dead is final, so come back anew
        elif record.incarnation >= me.incarnation and (
                record.status is Status.SUSPECT or record.incarnation > me.incarnation):
            if record.status is Status.SUSPECT:
                self.stats.refutations += 1
                self._health.apply(1)  # Lifeguard: being suspected hints we are the slow one
            self._self = replace(me, incarnation=record.incarnation + 1)
            self._queue_update(self._self)

    def _renew(self, generation: int) -> None:
        self.stats.rejoins += 1
        self._self = replace(self._self, generation=generation, incarnation=0,
                             status=Status.ALIVE, by="")
        self._queue_update(self._self)

    def _suspect(self, now: float, name: str, generation: int, out: list[Out]) -> None:
        record = self._table.get(name)
        if record is None or record.generation != generation or not record.status.live:
            return
        self.stats.suspicions += 1
        self._apply(now, record.with_status(Status.SUSPECT, by=self.name), out)

    # ── probing ──────────────────────────────────────────────────────────────

    def _run_probe(self, now: float, out: list[Out]) -> None:
        probe = self._probe
        if probe is not None:
            if not probe.indirect and now >= probe.direct_until:
                self._go_indirect(now, probe, out)
            if now >= probe.deadline:
                self._probe = None
                self.stats.probe_failures += 1
                self._health.apply(probe.health_penalty)
                self._suspect(now, probe.target, probe.generation, out)
        if self._probe is None and now >= self._next_probe:
            self._start_probe(now, out)

    def _start_probe(self, now: float, out: list[Out]) -> None:
        scale = self._health.score + 1
        self._next_probe = now + self.config.probe_interval * scale
        self._lag_counted = False
        name = self._order.next(
            lambda: self._table.names(Status.ALIVE, Status.SUSPECT), self._table.is_live)
        if name is None:
            return
        target = self._table.get(name)
        assert target is not None  # the order only yields live members
        self._seq += 1
        self._probe = Probe(
            target=name, generation=target.generation, seq=self._seq,
            direct_until=now + self.config.probe_timeout * scale,
            deadline=now + self.config.probe_interval * scale,
            indirect_window=(self.config.probe_interval - self.config.probe_timeout) * scale,
        )
        self.stats.probes += 1
        # Buddy system: a suspect learns of its suspicion from the probe itself.
        lead = target if target.status is Status.SUSPECT else None
        out.append(self._send(target.addr, Ping(self._seq, name), lead=lead))

    def _go_indirect(self, now: float, probe: Probe, out: list[Out]) -> None:
        target = self._table.get(probe.target)
        k = self.config.indirect_checks
        drawn = self._table.sample(self._rng, k + 1, Status.ALIVE)  # the target may be drawn
        relays = [r for r in drawn if r.name != probe.target][:k]
        probe.go_indirect(now, len(relays), len(relays) if self.config.nacks else 0)
        if target is None or not relays:
            return
        self.stats.indirect_probes += 1
        for relay in relays:
            out.append(self._send(relay.addr, PingReq(probe.seq, target.name, target.addr)))

    def _on_ack(self, seq: int, out: list[Out]) -> None:
        if self._probe is not None and self._probe.seq == seq:
            self._probe = None
            self._health.apply(-1)
            return
        relay = self._relays.pop(seq, None)
        if relay is not None:
            out.append(self._send(relay.requester, Ack(relay.requester_seq)))

    def _relay(self, now: float, requester: Addr, req: PingReq, out: list[Out]) -> None:
        self._seq += 1
        nack_at = (now + self.config.probe_timeout * self.config.nack_fraction
                   if self.config.nacks else None)
        self._relays[self._seq] = Relay(requester, req.seq, nack_at, now + self.config.relay_ttl)
        known = self._table.get(req.target)
        lead = known if known is not None and known.status is Status.SUSPECT else None
        out.append(self._send(req.addr, Ping(self._seq, req.target), lead=lead))

    def _run_relays(self, now: float, out: list[Out]) -> None:
        for seq, relay in list(self._relays.items()):
            if relay.nack_at is not None and now >= relay.nack_at:
                relay.nack_at = None
                self.stats.nacks_sent += 1
                out.append(self._send(relay.requester, Nack(relay.requester_seq)))
            if now >= relay.expires:
                del self._relays[seq]

    # ── dissemination ────────────────────────────────────────────────────────

    def _gossip(self, now: float) -> list[Out]:
        if not self.piggyback.pending:
            return []
        horizon = now - self.config.gossip_to_the_dead_time
        recent = [n for n in self._table.by_status[Status.DEAD].names
                  if self._table.since(n) >= horizon]
        out: list[Out] = []
        for target in self._table.sample(self._rng, self.config.gossip_nodes, Status.ALIVE,
                                         Status.SUSPECT, extra=recent):
            send = self._send(target.addr, None)
            if send.message.updates or send.message.items:
                out.append(send)
        return out

    def _push_pull(self, out: list[Out]) -> None:
        digest = self._table.digest.digest(self._self)
        for peer in self._table.sample(self._rng, 1, Status.ALIVE):
            out.append(Send(peer.addr, Message(self.name, Sync((self._self,), True, digest))))

    def _announce_to_dead(self, out: list[Out]) -> None:
        for record in self._table.sample(self._rng, self.config.dead_announce_nodes, Status.DEAD):
            out.append(Send(record.addr, Message(self.name, Sync((self._self, record), True))))

    def _hello(self, seeds: list[Addr]) -> list[Out]:
        return [Send(a, Message(self.name, Sync((self._self,), True))) for a in seeds]

    def _sync(self, addr: Addr, *, reply: bool, buckets: list[int] | tuple[int, ...] | None = None,
              want: list[int] | tuple[int, ...] = ()) -> list[Out]:
        """Our member table to ``addr``: whole (a join), or the buckets a push-pull found
        different (``memberdigest.py``), asking for the peer's records in ``want``."""
        if buckets is None:
            records = [self._self, *self._table]
        else:
            mine = [self._self] if bucket_of(self.name) in buckets else []
            records = mine + [r for n in self._table.digest.names_in(buckets)
                              if (r := self._table.get(n)) is not None]
        messages = self.piggyback.sync_messages(self.name, records, reply, want=tuple(want))
        return [Send(addr, m) for m in messages]

    def _queue_update(self, record: MemberRecord) -> None:
        self.piggyback.queue_update(record)

    def _deliver(self, now: float, item: Item, sender: str, out: list[Out]) -> None:
        if self.piggyback.received_item(now, item):
            self.stats.items_delivered += 1
            out.append(Delivered(item, sender, direct=False))

    def _send(self, addr: Addr, body: Body, *, lead: MemberRecord | None = None) -> Send:
        limit = self.config.retransmit_limit(self.n)
        return Send(addr, self.piggyback.message(self.name, body, limit, lead))

    def _start(self, now: float) -> None:
        self._now = now
        if self._timers_set:
            return
        self._timers_set = True
        # Random phases keep a cluster started at once from probing in lockstep.
        c = self.config
        self._next_probe = now + self._rng.uniform(0, c.probe_interval)
        self._next_gossip = now + self._rng.uniform(0, c.gossip_interval)
        self._next_push_pull = now + self._rng.uniform(0.5, 1.0) * c.push_pull_period(self.n)
        self._next_dead_announce = now + self._rng.uniform(0, c.dead_announce_interval)
