"""Membership for one daemon: the ``Swim`` state machine on a real UDP endpoint.

This is the I/O shell. It binds the endpoint, seals what it sends and opens
what it receives (``packets.py``: AES-GCM with the gossip keyring, a replay
window per sender; bad packets dropped and counted), ticks the state machine
every ``tick_interval`` while measuring how late each tick runs (the lag
feeds Lifeguard's local health), persists the generation and peers,
contacts seeds until one answers, and hands events and received items to
listeners and feeds (``fanout.py``). Settings: ``MembershipConfig``.

For a replication layer: ``broadcast(item)`` queues an item that rides on
gossip to every member; ``send_direct(name, item)`` sends one packet to one
member; ``items()`` / ``add_listener`` receive both; ``events()`` streams
membership changes and ``members()`` lists the current view. ``set_keyring``
changes the gossip keys from the next packet on, and this member reports
the keys it holds in its metadata (``keys``), so a rotation can tell when
every member has one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from bodega.registry.membership.core.config import MembershipConfig, parse_seed
from bodega.registry.membership.core.members import (
    Addr,
    MemberRecord,
    MemberView,
    Role,
    Status,
    check_identity,
)
from bodega.registry.membership.core.messages import Item
from bodega.registry.membership.core.outputs import Delivered, Event, Out, Send
from bodega.registry.membership.core.packets import Packets
from bodega.registry.membership.core.swim import Swim
from bodega.registry.membership.fanout import Fanout, Listener
from bodega.registry.membership.feed import Feed
from bodega.registry.membership.metrics import MembershipMetrics
from bodega.registry.membership.statefile import SavedState, StateFile
from bodega.registry.membership.transport import Binder, Transport, UdpTransport
from bodega.registry.sealing.core.envelope import Envelope, SealedEnvelope
from bodega.registry.sealing.core.keyring import REPORT_META, Keyring
from bodega.runtime.waits import within

log = logging.getLogger("bodega.registry.membership")

SAVED_PEERS_TO_TRY = 5  # like Corrosion: a few remembered peers stand in for seeds
SAVE_INTERVAL = 5.0  # peer list writes are batched; the generation is written at once
METRICS_INTERVAL = 1.0
IDLE_TICK = 0.5  # the longest the state machine goes unticked, whatever it says it awaits
# A member no seed answers says so after this many seconds, then at doubling gaps up to
# ALONE_MOST, looking every ALONE_CHECK seconds.
ALONE_FIRST_WARNING = 10.0
ALONE_MOST = 300.0
ALONE_CHECK = 1.0


class Membership:
    def __init__(self, config: MembershipConfig, *, registry: CollectorRegistry | None = None,
                 bind: Binder = UdpTransport.bind, rng: random.Random | None = None,
                 envelope: Envelope | None = None) -> None:
        for seed in config.seeds:
            parse_seed(seed)
        if config.advertise_host is None and config.bind_host in ("0.0.0.0", "::", ""):
            raise ValueError("advertise_host is required when binding a wildcard address")
        Role(config.role)
        self.keyring = config.keyring
        check_identity(config.name, (config.advertise_host or config.bind_host, config.bind_port),
                       config.region, self._meta(config.meta))
        self.config = config
        self.metrics = MembershipMetrics(registry or CollectorRegistry())
        # The first sequence number is the wall clock in nanoseconds: above anything an
        # earlier life of this member sent, with nothing to persist (``replay.py``).
        self._packets = Packets(envelope or SealedEnvelope(
            config.keyring, config.name, first_seq=time.time_ns(), salts=os.urandom),
            self.metrics, config.swim.packet_size)
        self._bind = bind
        self._rng = rng or random.Random()
        self._state = StateFile(config.state_path)
        self._transport: Transport | None = None
        self._swim: Swim | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._fanout = Fanout(config.feed_capacity)
        self._saved_generation = 0
        self._remembered: dict[str, dict[str, str]] = {}
        self._peers_dirty = False
        self._next_save = self._next_metrics = 0.0
        self._poke = asyncio.Event()  # something may have brought the next tick forward

    # ── lifecycle ────────────────────────────────────────────────────────────

    async def start(self) -> None:
        if self._swim is not None:
            raise RuntimeError("membership is already started")
        saved = self._state.load()
        self._remembered = {n: m for n, m in saved.meta.items() if n != self.config.name}
        transport = await self._bind(self.config.bind_host, self.config.bind_port, self._on_packet)
        self._transport = transport
        host = self.config.advertise_host or self.config.bind_host
        generation = saved.generation + 1
        self._swim = Swim(self.config.name, (host, transport.local_addr[1]), self.config.role,
                          self.config.region, self._meta(self.config.meta),
                          generation=generation,
                          config=self.config.swim, rng=self._rng)
        self._save()  # the new generation is durable before anyone hears of it
        known = [a for n, a in saved.peers.items() if n != self.config.name]
        remembered = self._rng.sample(known, min(SAVED_PEERS_TO_TRY, len(known)))
        self._tasks = [asyncio.create_task(self._run(), name=f"swim-{self.config.name}"),
                       asyncio.create_task(self._join(remembered), name="swim-join"),
                       asyncio.create_task(self._say_while_alone(remembered),
                                           name="swim-alone")]
        for task in self._tasks:
            task.add_done_callback(_log_failure)

    async def stop(self, *, leave: bool = True) -> None:
        """Stop; with ``leave``, first tell the cluster (it shows ``left``, not ``dead``)."""
        swim = self._swim
        if leave and swim is not None and not swim.leaving and self._tasks:
            self._handle(swim.leave(self._now()))
            self._poke.set()
            await asyncio.sleep(self.config.leave_timeout)  # the runner keeps gossiping
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if swim is not None:
            self._save()
        if self._transport is not None:
            self._transport.close()
        self._fanout.close()

    # ── what replication and the daemons use ─────────────────────────────────

    @property
    def swim(self) -> Swim:
        if self._swim is None:
            raise RuntimeError("membership is not started")
        return self._swim

    @property
    def addr(self) -> Addr:
        """The advertised gossip address (with the bound port)."""
        return self.swim.local.addr

    def members(self) -> list[MemberView]:
        return self.swim.members()

    def member(self, name: str) -> MemberView | None:
        return self.swim.member(name)

    def holders(self) -> list[str]:
        """The other live members that hold a replica (``Swim.alive_holders``)."""
        return self.swim.alive_holders()

    def status_since(self, name: str) -> float | None:
        """When ``name``'s status last changed as this node saw it, in seconds since the
        epoch (the table counts on the loop's clock, which has no date)."""
        since = self.swim.status_since(name)
        return None if since is None else time.time() - (self._now() - since)

    def alive(self) -> list[MemberView]:
        return [m for m in self.swim.members() if m.status is Status.ALIVE]

    def broadcast(self, item: Item) -> None:
        """Queue ``item`` for epidemic delivery to every member (raises ``ItemTooLarge``)."""
        self.swim.broadcast(item)
        self._poke.set()

    def send_direct(self, name: str, item: Item) -> None:
        """One packet with ``item`` to member ``name`` (raises ``UnknownMember``)."""
        self._handle(self.swim.send_direct(self._now(), name, item))
        self._poke.set()

    def update_meta(self, meta: dict[str, str]) -> None:
        self.swim.update_meta(self._meta(meta))
        self._poke.set()

    def suspicion_deadline(self, name: str) -> float | None:
        """When this node declares suspect ``name`` dead unless refuted (the loop's clock)."""
        return self.swim.suspicion_deadline(name)

    def host(self, name: str, role: str, region: str, meta: dict[str, str],
             generation: int) -> MemberRecord:
        """A tenant (a process of this host, ``tenants.py``) checked in: the record this
        member now gossips for it."""
        record, outs = self.swim.host(self._now(), name, role, region, meta, generation)
        self._handle(outs)
        self._poke.set()
        return record

    def tenant_left(self, name: str) -> None:
        self._handle(self.swim.tenant_left(self._now(), name))
        self._poke.set()

    def set_keyring(self, keyring: Keyring) -> None:
        """Seal with ``keyring``'s primary and open with its keys, and say so in our metadata."""
        self._packets.envelope.set_keyring(keyring)
        self.keyring = keyring
        if self._swim is not None:
            self._swim.update_meta(self._meta(self._swim.local.meta))
            self._poke.set()

    def lacks_key(self) -> bool:
        """Packets sealed with a key this member does not hold arrived lately."""
        return self._packets.lacks_key(self._now())

    def known_meta(self) -> dict[str, dict[str, str]]:
        """Every other member heard of, whatever its status, and those remembered from an
        earlier life: their metadata, to reach them some other way than by gossip."""
        others = {m.name: m.meta for m in self.swim.members() if m.name != self.swim.name}
        return {**self._remembered, **others}

    def _meta(self, meta: dict[str, str]) -> dict[str, str]:
        return {**meta, REPORT_META: self.keyring.report()}

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` inline for every event and item; returns the remover.

        Listeners run on the event loop between packets: they must not block.
        """
        return self._fanout.add_listener(listener)

    def events(self) -> Feed[Event]:
        """A feed of membership events from now on (``async for``; ``close()`` when done)."""
        return self._fanout.events()

    def items(self) -> Feed[Delivered]:
        """A feed of broadcast and direct items received from now on."""
        return self._fanout.items()

    # ── the shell ────────────────────────────────────────────────────────────

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def _run(self) -> None:
        """Tick the state machine when it has something to do (``Swim.next_due``, but no
        sooner than ``tick_interval`` after the last tick and no later than ``IDLE_TICK``),
        and at once after anything that may bring that forward (``_poke``): an idle member
        wakes a few times a second, not 20."""
        tick = self.config.tick_interval
        expected = self._now() + tick
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self._poke.wait(), max(0.0, expected - self._now()))
            self._poke.clear()
            now = self._now()
            lag = max(0.0, now - expected)  # 0 when poked: the wake was not late
            self.metrics.loop_lag.observe(lag)
            self.swim.note_loop_lag(lag)
            self._handle(self.swim.tick(now))
            self._housekeeping(now)
            expected = max(now + tick, min(self.swim.next_due(), now + IDLE_TICK))

    async def _join(self, remembered: list[Addr]) -> None:
        """Resolve seeds and join through them and remembered peers.

        The state machine retries the addresses it was given until one answers;
        this task only keeps resolving seed names that do not resolve yet.
        """
        pending = list(self.config.seeds)
        addrs = list(remembered)
        if not pending and not addrs:
            self._handle(self.swim.join(self._now(), []))  # the first member: alone is joined
            self._poke.set()
            return
        first = True
        while not self.swim.joined or first:
            unresolved = []
            for seed in pending:
                addr = await self._resolve(seed)
                if addr is None:
                    unresolved.append(seed)
                else:
                    addrs.append(addr)
            if addrs and (first or len(unresolved) < len(pending)):
                self._handle(self.swim.join(self._now(), addrs))
                self._poke.set()
            first, pending = False, unresolved
            if not pending:
                return
            await asyncio.sleep(self.config.swim.join_retry_max)

    async def _say_while_alone(self, remembered: list[Addr]) -> None:
        """Say so, now and then, while no member has answered: a member whose seeds are all
        down keeps trying in silence otherwise (a joined host restarted while the host it
        joined through is gone). Then say when one does."""
        if not self.config.seeds and not remembered:
            return  # the first member: alone is joined
        began = self._now()
        gap = next_warning = ALONE_FIRST_WARNING  # seconds alone, then doubling gaps
        while not self.swim.joined:
            await asyncio.sleep(ALONE_CHECK)
            alone = self._now() - began
            if self.swim.joined or alone < next_warning:
                continue
            tried = [*self.config.seeds, *(f"{h}:{p}" for h, p in remembered)]
            log.warning("no member of the cluster has answered in %.0fs (tried %s): this "
                        "member runs alone meanwhile and keeps trying", alone,
                        ", ".join(dict.fromkeys(tried)))
            gap = min(gap * 2, ALONE_MOST)
            next_warning = alone + gap
        if self._now() - began >= ALONE_FIRST_WARNING:
            log.info("joined the cluster after %.0fs alone", self._now() - began)

    async def _resolve(self, seed: str) -> Addr | None:
        host, port = parse_seed(seed)
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port)
        except OSError as e:
            log.warning("seed %s does not resolve yet: %s", seed, e)
            return None
        sockaddr = infos[0][4]
        return str(sockaddr[0]), int(sockaddr[1])

    def _on_packet(self, data: bytes, addr: Addr) -> None:
        message = self._packets.inbound(self._now(), data)
        if message is None or self._swim is None:
            return
        try:
            self._handle(self._swim.receive(self._now(), addr, message))
            self._poke.set()
        except Exception:  # one bad packet must not take membership down with it
            log.exception("failed to handle a gossip packet from %s:%s", *addr)
            self.metrics.bad_packets.labels("error").inc()

    def _handle(self, outs: list[Out]) -> None:
        for out in outs:
            if isinstance(out, Send):
                self._send(out)
                continue
            if isinstance(out, Event):
                self._peers_dirty = True
            self._fanout.deliver(out)
        if self._swim is not None and self._swim.generation != self._saved_generation:
            self._save()  # we came back as a new generation: it must survive a restart

    def _send(self, send: Send) -> None:
        if self._transport is None or self._swim is None:
            return
        packet = self._packets.outbound(send.message, self._swim.generation)
        if not self._transport.send(packet, send.addr):
            self.metrics.send_failures.inc()

    def _housekeeping(self, now: float) -> None:
        if self._peers_dirty and now >= self._next_save:
            self._next_save = now + SAVE_INTERVAL
            self._save()
        if now >= self._next_metrics:
            self._next_metrics = now + METRICS_INTERVAL
            self.metrics.observe(self.swim)

    def _save(self) -> None:
        swim = self.swim
        live = [m for m in swim.members() if m.status.live and m.name != swim.name]
        try:
            # Peers to rejoin through: members that gossip (a tenant's address is its
            # agent's, maybe ours). Everyone's metadata: their URLs, to reach them anyway.
            self._state.save(SavedState(swim.generation,
                                        {m.name: m.addr for m in live if not m.host},
                                        {m.name: m.meta for m in live}))
        except OSError as e:
            log.error("cannot save membership state to %s: %s", self._state.path, e)
            return
        self._saved_generation = swim.generation
        self._peers_dirty = False


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("membership task %s failed", task.get_name(), exc_info=task.exception())
