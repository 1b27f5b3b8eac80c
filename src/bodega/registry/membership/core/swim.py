"""SWIM membership with Lifeguard, as a pure state machine.

No sockets, no clock, no tasks: the driver calls ``tick(now)`` often (every
50-100 ms), hands in every decoded packet with ``receive(now, addr, msg)``,
and performs the ``Send``s it gets back; ``Event``s and ``Delivered`` items go
to listeners. Every timer is a deadline checked in ``tick``; every random
choice comes from the injected ``random.Random``. The same code runs on real
UDP (``udp.py``) and on the simulated network (``simnet.py``).

Per tick, in order: join retries, expired suspicions, relay nacks, the probe
round, push-pull, announcements to dead members, gossip. ``Swim`` holds this
node's own record and applies what it hears about members; the failure
detector is ``probes.py`` (``Prober``), what is sent to whom besides probes
``dissemination.py``, what rides on packets ``broadcasts.py``. Membership
rules live in ``members.py`` (precedence), ``table.py`` (what this node
knows) and ``suspicion.py`` (timeouts, local health).

A registry agent also speaks for its host's other processes (its tenants,
``tenants.py``): ``host`` records one as it checks in, ``tick`` suspects and
kills those gone silent, and the agent refutes what others claim against a
tenant still checking in, as it refutes claims against itself. Every node
takes a tenant for dead once its agent is dead or left.

The module is long because it is one state machine: every rule about whose
claim wins, for ourselves, our tenants and the others, reads and writes the
same record and table, in the order a tick or a packet applies them.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

from bodega.registry.membership.core.broadcasts import Piggyback
from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.dissemination import Dissemination
from bodega.registry.membership.core.members import (
    Addr,
    MemberRecord,
    MemberView,
    Role,
    Status,
    check_identity,
    supersedes,
)
from bodega.registry.membership.core.messages import (
    Ack,
    Direct,
    Item,
    Message,
    Nack,
    Ping,
    PingReq,
    Sync,
)
from bodega.registry.membership.core.outputs import Delivered, Event, Out, SwimStats, UnknownMember
from bodega.registry.membership.core.probes import Prober
from bodega.registry.membership.core.suspicion import LocalHealth
from bodega.registry.membership.core.table import Change, MemberTable
from bodega.registry.membership.core.tenants import Tenants


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
        self.stats = SwimStats()
        self._spread = Dissemination(name, self.config, self._rng, self._table, self.piggyback)
        self._prober = Prober(self.config, self._rng, self._table, self._health, self.stats,
                              self._spread.send)
        self._tenants = Tenants(self.config.tenant_suspect_after, self.config.tenant_dead_after)
        self._now = 0.0
        self._timers_set = False
        self.joined = False
        self.leaving = False

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

    def alive_holders(self) -> list[str]:
        """Names of the other members now alive that hold a replica and serve pulls
        (``meta["sync"]``); shared, do not change (O(1))."""
        return self._table.holders.names

    def members(self) -> list[MemberView]:
        """Every member, ourselves included, sorted by name (built once per change)."""
        return self._table.views(self._self)

    def member(self, name: str) -> MemberView | None:
        record = self.record_of(name)
        return None if record is None else MemberView.of(record)

    def record_of(self, name: str) -> MemberRecord | None:
        return self._self if name == self.name else self._table.get(name)

    def records(self) -> list[MemberRecord]:
        """Every record, ours first."""
        return [self._self, *self._table]

    def changed_since(self, version: int) -> list[MemberRecord]:
        """Ours (whose changes ``table_version`` does not count), then every other record
        that changed after ``version`` of the table."""
        return [self._self, *self._table.changed_since(version)]

    @property
    def table_version(self) -> int:
        """Rises with every change to what this node knows of the others."""
        return self._table.version

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
                self._prober.add(record.name)
        self.joined = True

    def status_since(self, name: str) -> float | None:
        """When another member's status last changed, or it came back as a new generation
        (this node's clock); None for ourselves or a member not in the table."""
        return None if name == self.name or self._table.get(name) is None \
            else self._table.since(name)

    def suspicion_deadline(self, name: str) -> float | None:
        s = self._table.suspicion(name)
        return None if s is None else s.deadline

    def suspicion_deadlines(self) -> dict[str, float]:
        """Every suspect this node holds a timer for, and when it declares it dead."""
        return self._table.suspicion_deadlines()

    # ── commands ─────────────────────────────────────────────────────────────

    def join(self, now: float, seeds: list[Addr]) -> list[Out]:
        """Contact seeds (retried with backoff until one answers with its table)."""
        self._start(now)
        others = [a for a in dict.fromkeys(seeds) if a != self._self.addr]
        self.joined = not others  # the first member: alone is joined
        return self._spread.join(now, self._self, others)

    def leave(self, now: float) -> list[Out]:
        """Announce a graceful leave; keep ticking a little so the news spreads."""
        self._start(now)
        self.leaving = True
        self._prober.cancel()
        self._self = self._self.with_status(Status.LEFT, by=self.name)
        self._queue_update(self._self)
        return self._spread.gossip(now)

    def update_meta(self, meta: dict[str, str]) -> None:
        """New metadata for ourselves: a higher incarnation makes it win everywhere."""
        check_identity(self.name, self._self.addr, self._self.region, meta)
        self._self = replace(self._self, meta=dict(meta), incarnation=self.incarnation + 1)
        self._queue_update(self._self)

    def note_loop_lag(self, seconds: float) -> None:
        """Our event loop ran ``seconds`` late: Lifeguard counts that against our own health.
        A stall past a check-in's interval was our silence, not our tenants' (their
        check-ins wait to be read), so it counts against none of them."""
        self._prober.note_loop_lag(seconds)
        if seconds > self.config.tenant_interval:
            self._tenants.postpone(seconds)

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
        return [self._spread.send(record.addr, Direct(item))]

    def host(self, now: float, name: str, role: Role | str, region: str,
             meta: dict[str, str], generation: int) -> tuple[MemberRecord, list[Out]]:
        """A process of this host checks in (``generation``: its own count of its lives):
        speak for it from now on. Its record carries our address and us as its ``host``;
        a new life, a suspicion lifted or new metadata is news for every member."""
        self._start(now)
        out: list[Out] = []
        current = self._table.get(name)
        if name == self.name:
            raise ValueError(f"{name} is this agent itself")
        if current is not None and current.host == self.name and current.status.live \
                and current.generation >= generation:
            record = current
            if (current.status is Status.SUSPECT or current.role != Role(role)
                    or current.region != region or current.meta != meta):
                record = replace(current, role=Role(role), region=region, meta=dict(meta),
                                 incarnation=current.incarnation + 1, status=Status.ALIVE,
                                 by="")
        else:
            if current is not None:
                generation = max(generation, current.generation + 1)
            record = MemberRecord(name, self._self.addr, Role(role), region, dict(meta), 0,
                                  generation, host=self.name)
        self._tenants.heard(now, name)
        if record is not current:
            self._merge(now, record, out)
        return record, out

    def tenant_left(self, now: float, name: str) -> list[Out]:
        """A process we speak for is stopping for good: it shows ``left``."""
        self._start(now)
        out: list[Out] = []
        self._tenants.forget(name)
        current = self._table.get(name)
        if current is not None and current.host == self.name and current.status.live:
            self._merge(now, current.with_status(Status.LEFT, by=self.name), out)
        return out

    # ── driving ──────────────────────────────────────────────────────────────

    def tick(self, now: float) -> list[Out]:
        self._start(now)
        out: list[Out] = []
        if not self.joined:
            out += self._spread.retry_join(now, self._self)
        for change in self._table.expire(now, self.name):
            self.stats.deaths += 1
            self._accepted(change, out)
        for name, status in self._tenants.due(now):
            current = self._table.get(name)
            if current is not None and current.host == self.name and current.status.live:
                self._merge(now, current.with_status(status, by=self.name), out)
        self._prober.run_relays(now, out)
        if not self.leaving:
            failed = self._prober.expire(now, out)
            if failed is not None:
                self._suspect(now, failed.target, failed.generation, out)
            self._prober.start_due(now, out)
        out += self._spread.due(now, self._self, leaving=self.leaving)
        return out

    def next_due(self) -> float:
        """The earliest time ``tick`` has something to do; a receive, a broadcast or a join
        may bring it forward (the driver asks again after each)."""
        if not self._timers_set:
            return -math.inf  # the first tick sets the timers
        return min(self._table.next_expiry(), self._tenants.next_due(),
                   self._prober.next_due(leaving=self.leaving),
                   self._spread.next_due(leaving=self.leaving, joined=self.joined))

    def receive(self, now: float, sender: Addr, message: Message) -> list[Out]:
        self._start(now)
        out: list[Out] = []
        for record in message.updates:
            self._apply(now, record, out)
        for item in message.items:
            self._deliver(now, item, message.sender, out)
        match message.body:
            case Ping(seq, target) if target == self.name or target in self._tenants:
                # A member of a version before hosted members probes our tenants as it
                # probes anyone: we answer for those still checking in.
                out.append(self._spread.send(sender, Ack(seq)))
            case Ack(seq):
                self._prober.on_ack(seq, out)
            case Nack(seq):
                self._prober.on_nack(seq)
            case PingReq() as req:
                self._prober.relay(now, sender, req, out)
            case Sync(records, reply, digest, want):
                for record in records:
                    self._apply(now, record, out)
                if digest is not None:  # a push-pull: send what differs, ask for theirs
                    out += self._spread.answer_push_pull(self._self, sender, digest)
                elif reply:
                    out += self._spread.sync(self._self, sender)
                else:
                    self.joined = True
                if want:
                    out += self._spread.sync(self._self, sender, buckets=want)
            case Direct(item):
                self.stats.items_delivered += 1
                out.append(Delivered(item, message.sender, direct=True))
            case _:
                pass
        return out

    # ── membership rules ─────────────────────────────────────────────────────

    def _apply(self, now: float, record: MemberRecord, out: list[Out]) -> None:
        if record.name == self.name:
            self._about_me(record, out)
            return
        if record.name in self._tenants:
            self._about_tenant(now, record, out)
            return
        change = self._merge(now, record, out)
        if change is not None and change.new.host == self.name and change.new.status.live:
            # Said to be ours (an earlier life of ours spoke for it): judged from now on,
            # so it is dead in time unless it checks in with us.
            self._tenants.heard(now, change.new.name)

    def _accepted(self, change: Change, out: list[Out]) -> None:
        new = change.new
        if new.status.live and not new.host:
            self._prober.add(new.name)
        self._queue_update(new)
        kind = change.kind
        if kind is not None:
            out.append(Event(kind, MemberView.of(new)))
        if not new.status.live:  # an agent dead or gone: so is every process it spoke for
            for tenant in self._table.hosted_by(new.name):
                if tenant.status.live:
                    self._apply(self._now, tenant.with_status(Status.DEAD, by=self.name), out)

    def _merge(self, now: float, record: MemberRecord, out: list[Out]) -> Change | None:
        """Merge a claim into the table (ours about a tenant, or anyone's); if it won, pass
        it on and say what changed."""
        change = self._table.apply(now, record)
        if change is not None:
            self._accepted(change, out)
        return change

    def _about_tenant(self, now: float, record: MemberRecord, out: list[Out]) -> None:
        """Someone's claim about a tenant still checking in with us: refute what would win
        over our record (a death another node derived, say, when it took us for dead)."""
        current = self._table.get(record.name)
        assert current is not None  # a tenant checked in, so we hold its record
        if not supersedes(record, current):
            return
        if record.generation > current.generation or not record.status.live:
            renewed = replace(current, generation=max(record.generation, current.generation)
                              + 1, incarnation=0, status=Status.ALIVE, by="")
        else:
            renewed = replace(current, incarnation=record.incarnation + 1, status=Status.ALIVE,
                              by="")
        self._merge(now, renewed, out)

    def _about_me(self, record: MemberRecord, out: list[Out]) -> None:
        me = self._self
        if self.leaving or record.generation < me.generation:
            return
        if record.generation > me.generation:
            self._renew(record.generation + 1, out)  # our generation counter was lost
        elif not record.status.live:
            self._renew(me.generation + 1, out)  # declared dead: dead is final, so come back anew
        elif record.incarnation >= me.incarnation and (
                record.status is Status.SUSPECT or record.incarnation > me.incarnation):
            if record.status is Status.SUSPECT:
                self.stats.refutations += 1
                self._health.apply(1)  # Lifeguard: being suspected hints we are the slow one
            self._self = replace(me, incarnation=record.incarnation + 1)
            self._queue_update(self._self)

    def _renew(self, generation: int, out: list[Out]) -> None:
        self.stats.rejoins += 1
        self._self = replace(self._self, generation=generation, incarnation=0,
                             status=Status.ALIVE, by="")
        self._queue_update(self._self)
        # Whoever took us for dead took our tenants for dead too: they come back with us.
        for tenant in self._table.hosted_by(self.name):
            if tenant.name in self._tenants:
                self._merge(self._now, replace(
                    tenant, generation=tenant.generation + 1, incarnation=0,
                    status=Status.ALIVE, by=""), out)

    def _suspect(self, now: float, name: str, generation: int, out: list[Out]) -> None:
        record = self._table.get(name)
        if record is None or record.generation != generation or not record.status.live:
            return
        self.stats.suspicions += 1
        self._apply(now, record.with_status(Status.SUSPECT, by=self.name), out)

    # ── what rides on packets ────────────────────────────────────────────────

    def _queue_update(self, record: MemberRecord) -> None:
        self.piggyback.queue_update(record)

    def _deliver(self, now: float, item: Item, sender: str, out: list[Out]) -> None:
        if self.piggyback.received_item(now, item):
            self.stats.items_delivered += 1
            out.append(Delivered(item, sender, direct=False))

    def _start(self, now: float) -> None:
        self._now = now
        if self._timers_set:
            return
        self._timers_set = True
        # Random phases keep a cluster started at once from probing in lockstep.
        self._prober.set_phase(now)
        self._spread.set_phase(now)
