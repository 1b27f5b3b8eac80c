"""SWIM's failure detector: the probe round (``Prober``) and its bookkeeping.

``Prober`` decides whom to probe next, when a probe goes indirect or fails,
and answers the ping-reqs other members send; ``Swim`` turns a failed probe
into a suspicion. Every packet it sends goes through the ``send`` it is
given, so it carries piggybacked news like any other (``dissemination.py``).

One probe round (timeouts scaled by local health, ``x (score+1)``)::

    sent ── ping ──▶ target
      │ ack ─────────────────────────────▶ done (health -1)
      ├─ direct_until: ping-req to k relays ──▶ relay pings target
      │                 relay: ack ──▶ forwarded ack ──▶ done
      │                 relay: nothing by 80% of its timeout ──▶ nack
      └─ deadline: no ack ──▶ suspect target;
                   health + (relays - nacks), or +1 with no relays

The indirect phase always gets its full length counted from when the
ping-reqs actually left, so a tick delayed by a busy loop shortens nothing.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import Addr, MemberRecord, Status
from bodega.registry.membership.core.messages import Ack, Body, Nack, Ping, PingReq
from bodega.registry.membership.core.outputs import Out, Send, SwimStats
from bodega.registry.membership.core.suspicion import LocalHealth
from bodega.registry.membership.core.table import MemberTable

Sender = Callable[[Addr, Body, MemberRecord | None], Send]  # a packet, news piggybacked


@dataclass
class Probe:
    target: str
    generation: int
    seq: int
    direct_until: float
    deadline: float
    indirect_window: float
    indirect: bool = False
    relays: int = 0  # nacks we may expect
    nacks: int = 0

    def go_indirect(self, now: float, relays: int, expected_nacks: int) -> None:
        self.indirect = True
        self.relays = expected_nacks
        if relays:
            self.deadline = max(self.deadline, now + self.indirect_window)

    @property
    def health_penalty(self) -> int:
        """Lifeguard: a missing nack means the trouble may be ours, not the target's."""
        return self.relays - self.nacks if self.relays else 1


@dataclass
class Relay:
    """A ping we send on behalf of a requester's ping-req."""

    requester: Addr
    requester_seq: int
    nack_at: float | None
    expires: float


class ProbeOrder:
    """Round-robin over a shuffled member list (SWIM §4.3: bounded time to first probe).

    A new member is inserted at a random position ahead of the cursor, so it is
    probed within this round without biasing the order towards join order.
    """

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._order: list[str] = []
        self._listed: set[str] = set()  # membership tests only: sets iterate unreproducibly
        self._index = 0

    def add(self, name: str) -> None:
        if name in self._listed:
            return
        self._listed.add(name)
        self._order.insert(self._rng.randint(self._index, len(self._order)), name)

    def next(self, live: Callable[[], list[str]], eligible: Callable[[str], bool]) -> str | None:
        """The next eligible name; reshuffles ``live()`` when a round ends."""
        for _ in range(len(self._order) + 2):
            if self._index >= len(self._order):
                self._order = live()
                self._rng.shuffle(self._order)
                self._listed = set(self._order)
                self._index = 0
                if not self._order:
                    return None
            name = self._order[self._index]
            self._index += 1
            if eligible(name):
                return name
        return None


class Prober:
    """One probe round at a time, and the pings this node relays for others."""

    def __init__(self, config: SwimConfig, rng: random.Random, table: MemberTable,
                 health: LocalHealth, stats: SwimStats, send: Sender) -> None:
        self.config = config
        self._rng = rng
        self._table = table
        self._health = health
        self._stats = stats
        self._send = send
        self._order = ProbeOrder(rng)
        self._probe: Probe | None = None
        self._relays: dict[int, Relay] = {}
        self._seq = 0
        self._next_probe = 0.0
        self._lag_counted = False

    def set_phase(self, now: float) -> None:
        self._next_probe = now + self._rng.uniform(0, self.config.probe_interval)

    def add(self, name: str) -> None:
        """A member now live: probe it within this round."""
        self._order.add(name)

    def cancel(self) -> None:
        """Drop the outstanding probe (we are leaving)."""
        self._probe = None

    def note_loop_lag(self, seconds: float) -> None:
        if seconds >= self.config.loop_lag_threshold and not self._lag_counted:
            self._lag_counted = True  # once per probe round, like a failed probe
            self._health.apply(1)

    def expire(self, now: float, out: list[Out]) -> Probe | None:
        """Move the outstanding probe on; the probe that just failed, to suspect its target."""
        probe = self._probe
        if probe is None:
            return None
        if not probe.indirect and now >= probe.direct_until:
            self._go_indirect(now, probe, out)
        if now < probe.deadline:
            return None
        self._probe = None
        self._stats.probe_failures += 1
        self._health.apply(probe.health_penalty)
        return probe

    def next_due(self, *, leaving: bool) -> float:
        """When ``expire``, ``start_due`` or ``run_relays`` next has something to do."""
        due = math.inf
        probe = self._probe
        if probe is not None:
            due = min(due, probe.deadline if probe.indirect else probe.direct_until)
        elif not leaving:
            due = self._next_probe
        for relay in self._relays.values():
            due = min(due, relay.expires if relay.nack_at is None else relay.nack_at)
        return due

    def start_due(self, now: float, out: list[Out]) -> None:
        if self._probe is None and now >= self._next_probe:
            self._start_probe(now, out)

    def on_ack(self, seq: int, out: list[Out]) -> None:
        if self._probe is not None and self._probe.seq == seq:
            self._probe = None
            self._health.apply(-1)
            return
        relay = self._relays.pop(seq, None)
        if relay is not None:
            out.append(self._send(relay.requester, Ack(relay.requester_seq), None))

    def on_nack(self, seq: int) -> None:
        if self._probe is not None and self._probe.seq == seq:
            self._probe.nacks += 1

    def relay(self, now: float, requester: Addr, req: PingReq, out: list[Out]) -> None:
        self._seq += 1
        nack_at = (now + self.config.probe_timeout * self.config.nack_fraction
                   if self.config.nacks else None)
        self._relays[self._seq] = Relay(requester, req.seq, nack_at, now + self.config.relay_ttl)
        known = self._table.get(req.target)
        lead = known if known is not None and known.status is Status.SUSPECT else None
        out.append(self._send(req.addr, Ping(self._seq, req.target), lead))

    def run_relays(self, now: float, out: list[Out]) -> None:
        for seq, relay in list(self._relays.items()):
            if relay.nack_at is not None and now >= relay.nack_at:
                relay.nack_at = None
                self._stats.nacks_sent += 1
                out.append(self._send(relay.requester, Nack(relay.requester_seq), None))
            if now >= relay.expires:
                del self._relays[seq]

    def _start_probe(self, now: float, out: list[Out]) -> None:
        scale = self._health.score + 1
        self._next_probe = now + self.config.probe_interval * scale
        self._lag_counted = False
        name = self._order.next(
            self._table.probe_targets, self._table.is_live)
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
        self._stats.probes += 1
        # Buddy system: a suspect learns of its suspicion from the probe itself.
        lead = target if target.status is Status.SUSPECT else None
        out.append(self._send(target.addr, Ping(self._seq, name), lead))

    def _go_indirect(self, now: float, probe: Probe, out: list[Out]) -> None:
        target = self._table.get(probe.target)
        k = self.config.indirect_checks
        drawn = self._table.sample(self._rng, k + 1, Status.ALIVE)  # the target may be drawn
        relays = [r for r in drawn if r.name != probe.target][:k]
        probe.go_indirect(now, len(relays), len(relays) if self.config.nacks else 0)
        if target is None or not relays:
            return
        self._stats.indirect_probes += 1
        for relay in relays:
            out.append(self._send(relay.addr, PingReq(probe.seq, target.name, target.addr), None))
