"""An in-memory lossy network on simulated time (``simtime.py``) that drives many ``Swim`` nodes.

Everything is deterministic for a given seed: one ``random.Random`` decides
latencies and losses and seeds each node's own generator, and events at the
same instant run in the order they were scheduled. Packets go through the
real codec and sealing (``wire=True``: one test keyring, salts counted), so
sizes, encodings and replay windows are exercised as on UDP. Faults: link
loss, latency, partitions, crashed nodes, and *slow* nodes whose packets wait
in a backlog and whose loop reports lag, as a CPU-starved process would.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import Addr, MemberView, Role, Status
from bodega.registry.membership.core.messages import Item, Message, decode, encode
from bodega.registry.membership.core.outputs import Delivered, Event, Out, Send
from bodega.registry.membership.core.swim import Swim
from bodega.registry.sealing.core.envelope import SealedEnvelope
from bodega.registry.sealing.core.keyring import GossipKey, Keyring
from bodega.sim.swim.simtime import Schedule, SimClock

SIM_PORT = 7946
SIM_KEYRING = Keyring.of(GossipKey(hashlib.sha256(b"bodega simnet gossip key").digest()))


@dataclass
class SimNode:
    name: str
    addr: Addr
    swim: Swim
    up: bool = True
    process: int = 0  # bumped on every (re)start; stale ticks of an old process are dropped
    envelope: SealedEnvelope | None = None  # a new one per process, as a restart makes


@dataclass(frozen=True)
class Observation:
    at: float
    observer: str
    event: Event


@dataclass
class Traffic:
    sent: int = 0
    lost: int = 0  # to loss or a partition
    bytes: int = 0
    largest: int = 0


class SimNet:
    def __init__(self, seed: int, *, config: SwimConfig | None = None, loss: float = 0.0,
                 latency: tuple[float, float] = (0.001, 0.010), tick_interval: float = 0.05,
                 wire: bool = True) -> None:
        self.clock = SimClock()
        self.config = config or SwimConfig()
        self.loss = loss
        self.latency = latency
        self.tick_interval = tick_interval
        self.nodes: dict[str, SimNode] = {}
        self.observations: list[Observation] = []
        self.deliveries: list[tuple[float, str, Delivered]] = []
        self.keep_deliveries = True  # long replication runs turn this off to save memory
        # Large simulations turn this off (N² join events) and watch ``on_event`` instead.
        self.keep_observations = True
        self.on_event: Callable[[Observation], None] | None = None
        self.traffic = Traffic()
        self._rng = random.Random(seed)
        self.wire = wire
        self._salts = itertools.count()
        self._schedule = Schedule(self.clock)
        self._by_addr: dict[Addr, str] = {}
        self._group: dict[str, int] = {}
        self._link_loss: dict[tuple[str, str], float] = {}
        self._slow: dict[str, float] = {}
        # Called with (node, item) for every item a node receives: replication hooks in here.
        self.on_delivered: Callable[[str, Delivered], None] | None = None

    @property
    def now(self) -> float:
        return self.clock.now

    # ── nodes ────────────────────────────────────────────────────────────────

    def add(self, name: str, *, role: Role | str = Role.WORKER, region: str = "sim",
            meta: dict[str, str] | None = None, generation: int = 1,
            config: SwimConfig | None = None) -> SimNode:
        addr = (f"10.{len(self._by_addr) // 250}.{len(self._by_addr) % 250}.1", SIM_PORT)
        node = SimNode(name, addr, self._swim(name, addr, role, region, meta, generation, config),
                       envelope=self._envelope(name))
        self.nodes[name] = node
        self._by_addr[addr] = name
        self._start_ticking(node)
        return node

    def join(self, name: str, seeds: Iterable[str]) -> None:
        node = self.nodes[name]
        self._dispatch(node, node.swim.join(self.now, [self.nodes[s].addr for s in seeds]))

    def kill(self, name: str) -> None:
        """Crash: the node stops ticking and receiving; packets to it vanish."""
        self.nodes[name].up = False

    def restart(self, name: str, seeds: Iterable[str], *, config: SwimConfig | None = None,
                generation: int | None = None) -> SimNode:
        """Start the member again as a new process: next generation, empty table."""
        node = self.nodes[name]
        old = node.swim
        node.swim = self._swim(name, node.addr, old.local.role, old.local.region,
                               old.local.meta, generation or old.generation + 1,
                               config or old.config)
        node.up = True
        node.process += 1
        node.envelope = self._envelope(name)
        self._start_ticking(node)
        self.join(name, seeds)
        return node

    def leave(self, name: str) -> None:
        node = self.nodes[name]
        self._dispatch(node, node.swim.leave(self.now))

    def broadcast(self, name: str, item: Item) -> None:
        self.nodes[name].swim.broadcast(item)

    def send_direct(self, name: str, to: str, item: Item) -> None:
        node = self.nodes[name]
        self._dispatch(node, node.swim.send_direct(self.now, to, item))

    # ── faults ───────────────────────────────────────────────────────────────

    def partition(self, *groups: Iterable[str]) -> None:
        """Only members of the same group can reach each other until ``heal``."""
        self._group = {name: i for i, group in enumerate(groups) for name in group}

    def heal(self) -> None:
        self._group = {}

    def set_link_loss(self, a: str, b: str, loss: float) -> None:
        self._link_loss[(a, b)] = self._link_loss[(b, a)] = loss

    def set_slow(self, name: str, delay: float) -> None:
        """``name`` handles every packet ``delay`` late and its loop reports that lag."""
        self._slow[name] = delay

    # ── running ──────────────────────────────────────────────────────────────

    def run_for(self, seconds: float) -> None:
        self.run_until_time(self.now + seconds)

    def run_until_time(self, until: float) -> None:
        self._schedule.run_until(until)

    def run_until(self, done: Callable[[], bool], *, timeout: float,
                  step: float = 0.25) -> bool:
        """Run until ``done()`` holds (checked every ``step`` simulated seconds)."""
        deadline = self.now + timeout
        while not done():
            if self.now >= deadline:
                return False
            self.run_until_time(min(deadline, self.now + step))
        return True

    # ── for layers on top (replication) ──────────────────────────────────────

    def at(self, when: float, action: Callable[[], None]) -> None:
        """Run ``action`` at simulated time ``when``, in order with every other event."""
        self._schedule.at(when, action)

    def connected(self, a: str, b: str) -> bool:
        """Both up and not partitioned apart: a TCP exchange between them would work."""
        return (self.nodes[a].up and self.nodes[b].up
                and self._loss(a, b) < 1.0 and self._loss(b, a) < 1.0)

    def delay(self) -> float:
        """One network latency, drawn like a packet's."""
        return self._rng.uniform(*self.latency)

    # ── looking ──────────────────────────────────────────────────────────────

    def up(self) -> list[str]:
        return [n for n, node in self.nodes.items() if node.up]

    def view(self, observer: str) -> dict[str, MemberView]:
        return {m.name: m for m in self.nodes[observer].swim.members()}

    def status(self, observer: str, name: str) -> Status | None:
        member = self.nodes[observer].swim.member(name)
        return None if member is None else member.status

    def everyone_sees(self, name: str, status: Status, *, generation: int | None = None,
                      observers: Iterable[str] | None = None) -> bool:
        for observer in observers if observers is not None else self.up():
            member = self.nodes[observer].swim.member(name)
            if member is None or member.status is not status:
                return False
            if generation is not None and member.generation != generation:
                return False
        return True

    def converged(self, names: Iterable[str] | None = None) -> bool:
        """Every live node sees exactly the live nodes alive."""
        expected = set(names if names is not None else self.up())
        for observer in expected:
            alive = {m.name for m in self.nodes[observer].swim.members()
                     if m.status is Status.ALIVE}
            if alive != expected:
                return False
        return True

    def first(self, kind: str, about: str, *, after: float = 0.0) -> list[Observation]:
        """Each observer's first event of ``kind`` about member ``about`` since ``after``."""
        seen: dict[str, Observation] = {}
        for o in self.observations:
            if (o.at >= after and o.event.kind == kind and o.event.member.name == about
                    and o.observer not in seen):
                seen[o.observer] = o
        return list(seen.values())

    # ── internals ────────────────────────────────────────────────────────────

    def _envelope(self, name: str) -> SealedEnvelope | None:
        # Sequence numbers start at the simulated clock in nanoseconds, as on a host.
        return None if not self.wire else SealedEnvelope(
            SIM_KEYRING, name, first_seq=int(self.now * 1e9),
            salts=lambda n: next(self._salts).to_bytes(n, "big"))

    def _swim(self, name: str, addr: Addr, role: Role | str, region: str,
              meta: dict[str, str] | None, generation: int, config: SwimConfig | None) -> Swim:
        return Swim(name, addr, role, region, meta, generation=generation,
                    config=config or self.config, rng=random.Random(self._rng.getrandbits(64)))

    def _start_ticking(self, node: SimNode) -> None:
        process = node.process
        self._schedule.at(self.now + self._rng.uniform(0, self.tick_interval),
                          lambda: self._tick(node, process))

    def _tick(self, node: SimNode, process: int) -> None:
        if not node.up or node.process != process:
            return
        lag = self._slow.get(node.name)
        if lag is not None:
            node.swim.note_loop_lag(lag)
        self._dispatch(node, node.swim.tick(self.now))
        self._schedule.at(self.now + self.tick_interval, lambda: self._tick(node, process))

    def _dispatch(self, node: SimNode, outs: list[Out]) -> None:
        for out in outs:
            if isinstance(out, Send):
                self._transmit(node, out)
            elif isinstance(out, Event):
                observation = Observation(self.now, node.name, out)
                if self.keep_observations:
                    self.observations.append(observation)
                if self.on_event is not None:
                    self.on_event(observation)
            else:
                if self.keep_deliveries:
                    self.deliveries.append((self.now, node.name, out))
                if self.on_delivered is not None:
                    self.on_delivered(node.name, out)

    def _transmit(self, node: SimNode, send: Send) -> None:
        self.traffic.sent += 1
        packet: Message | bytes = send.message
        if node.envelope is not None:
            packet = node.envelope.seal(encode(send.message), node.swim.generation)
            self.traffic.bytes += len(packet)
            self.traffic.largest = max(self.traffic.largest, len(packet))
            if len(packet) > self.config.packet_size:
                raise AssertionError(f"{len(packet)}-byte packet exceeds the UDP budget")
        to = self._by_addr.get(send.addr)
        if to is None or self._rng.random() < self._loss(node.name, to):
            self.traffic.lost += 1
            return
        delay = self._rng.uniform(*self.latency) + self._slow.get(to, 0.0)
        self._schedule.at(self.now + delay, lambda: self._arrive(node.addr, to, packet))

    def _loss(self, a: str, b: str) -> float:
        if self._group and self._group.get(a, -1) != self._group.get(b, -2):
            return 1.0
        return self._link_loss.get((a, b), self.loss)

    def _arrive(self, sender: Addr, to: str, packet: Message | bytes) -> None:
        node = self.nodes[to]
        if not node.up:
            return
        if isinstance(packet, bytes):
            assert node.envelope is not None
            opened = node.envelope.open(packet)
            packet = decode(opened.payload)
            node.envelope.accept(opened, packet.sender)
        self._dispatch(node, node.swim.receive(self.now, sender, packet))
