"""``RegistryNode``: the registry every daemon embeds (membership, replica, sync, subscriptions).

The I/O shell that wires the two roles together. It owns:

- a ``Membership`` (``membership/``: SWIM on UDP), which also carries row
  changes (``sync/rowgossip.py``): a local write is broadcast on
  gossip and pushed at once to a few random members; every node applies
  what it hears in batches, one transaction per loop turn;
- the ``Replica`` on a SQLite file in the data dir, read synchronously by
  the daemon (``get``, ``rows``) and written by it (``put_owned`` ...);
- anti-entropy (``sync/antientropy.py``): paced pulls over HTTP from
  live peers, comparing digests first;
- subscriptions, fed in the same call that applied each change, and served
  as NDJSON by ``routes()``, which the daemon mounts on its internal
  listener (mutual TLS) together with the sync route. ``meta["url"]`` tells
  peers where that is; ``set_meta`` changes what a member publishes about
  itself (its certificate's expiry after a renewal);
- the gossip keyring (``gossipkeys.py``): the one it was given or the later
  one its view holds, adopted whenever a rotation changes it (``keys``).

Reads and writes work before ``start`` (rows written then spread once the
node starts: anti-entropy carries them) and fail after ``stop``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry
from starlette.routing import BaseRoute

from bodega.model.rows import TypedReads
from bodega.registry.api.routes import MemberSubscriptions
from bodega.registry.api.subscriptions import Subscription, Subscriptions, normalize_filters
from bodega.registry.gossipkeys import KEY, TABLE, GossipKeys
from bodega.registry.member_surface import MemberSurface
from bodega.registry.membership.core.config import MembershipConfig, SwimConfig
from bodega.registry.membership.core.members import Role
from bodega.registry.membership.transport import Binder, UdpTransport
from bodega.registry.membership.udp import Membership
from bodega.registry.replication.core.exchange import SyncReply, SyncRequest
from bodega.registry.replication.core.known import Known
from bodega.registry.replication.core.rows import Change, Document
from bodega.registry.replication.metrics import ReplicationMetrics
from bodega.registry.replication.replica import Replica
from bodega.registry.replication.view import View
from bodega.registry.sealing.core.envelope import Envelope
from bodega.registry.sealing.core.keyring import Keyring
from bodega.registry.sync.antientropy import AntiEntropy
from bodega.registry.sync.client import SyncClient
from bodega.registry.sync.core.peers import AGENT_SYNC_INTERVAL, EAGER_PEERS, SYNC_INTERVAL
from bodega.registry.sync.routes import RegistryHttp
from bodega.registry.sync.rowgossip import RowGossip
from bodega.runtime.lifecycle import private_dir
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.core.access import REGISTRY
from bodega.wire.transport.peer_access import PeerAccess

log = logging.getLogger("bodega.registry")

HOUSEKEEPING_INTERVAL = 1.0


@dataclass(frozen=True)
class RegistryConfig:
    name: str
    role: str
    region: str
    data_dir: Path
    keyring: Keyring  # the gossip keys to start with, unless the view holds later ones
    # The host's keyring file: rewritten whenever the cluster's keyring changes.
    keyring_file: Path | None = None
    bind_host: str = "127.0.0.1"
    bind_port: int = 0
    advertise_host: str | None = None
    seeds: tuple[str, ...] = ()  # gossip "host:port" to join through
    meta: dict[str, str] = field(default_factory=dict)  # {"url": daemon's HTTP API}
    swim: SwimConfig = field(default_factory=SwimConfig)
    sync_interval: float | None = None  # None: the role's (an agent pulls more often)
    tombstone_ttl: float = 3600.0
    sync_peers: int = 1  # pulls per round; two while versions are missing
    eager_peers: int = EAGER_PEERS
    max_sync_rows: int = 2000  # rows per sync reply
    subscription_capacity: int = 10_000  # changes a subscriber may fall behind before cut off
    sync_timeout: float = 5.0

    @property
    def is_agent(self) -> bool:
        """A host's agent pushes rows new to it on, and pulls more often: it is the host's
        one replica (rowgossip.py, peers.py)."""
        return self.role == Role.AGENT

    @property
    def pull_interval(self) -> float:
        if self.sync_interval is not None:
            return self.sync_interval
        return AGENT_SYNC_INTERVAL if self.is_agent else SYNC_INTERVAL

    @property
    def view_path(self) -> Path:
        return self.data_dir / "registry.db"


class RegistryNode(MemberSurface, TypedReads):
    membership: Membership

    def __init__(self, config: RegistryConfig, *, registry: CollectorRegistry | None = None,
                 bind: Binder = UdpTransport.bind, rng: random.Random | None = None,
                 tls: InternalTls | None = None, envelope: Envelope | None = None) -> None:
        """``tls``: the daemon's; its routes check callers' roles, and pulls from peers
        present its certificate (None: plaintext, for measurement only)."""
        self.config = config
        self.tls = tls
        # Where peers pull from: the daemon's listener, which mounts ``routes()``.
        self._meta = {**config.meta, **({"sync": config.meta["url"]}
                                        if "url" in config.meta else {})}
        registry = registry or CollectorRegistry()
        self.metrics = ReplicationMetrics(registry)
        self._rng = rng or random.Random()
        self.membership = Membership(MembershipConfig(
            name=config.name, role=config.role, region=config.region, data_dir=config.data_dir,
            keyring=config.keyring, bind_host=config.bind_host,
            bind_port=config.bind_port, advertise_host=config.advertise_host,
            seeds=config.seeds, meta=dict(self._meta), swim=config.swim,
        ), registry=registry, bind=bind, rng=self._rng, envelope=envelope)
        private_dir(config.data_dir)  # the view holds every app's machines: not for machines
        self.view = View(config.view_path)
        self.keys = GossipKeys(self.membership, view_row=lambda: self.view.get(TABLE, KEY),
                               write_row=self.put_shared, file=config.keyring_file,
                               grace=config.swim.probe_interval)
        self.replica = Replica(config.name, self.view, tombstone_ttl=config.tombstone_ttl,
                               on_reject=self.metrics.reject)
        self.subscriptions = Subscriptions(config.subscription_capacity,
                                           on_lagged=self.metrics.lagged.inc)
        self._http = RegistryHttp(access=PeerAccess(REGISTRY, tls), serve=self._serve,
                                  compare=self.replica.compare, metrics=self.metrics)
        self._member_subscriptions = MemberSubscriptions(access=PeerAccess(REGISTRY, tls),
                                                         subscribe=self.subscribe_where)
        self._started = self._stopped = False
        self._gossip = RowGossip(config.name, self.replica, self.membership, self.metrics,
                                 eager_peers=config.eager_peers, rng=self._rng,
                                 on_changes=self._changed, stopped=self._is_stopped,
                                 push_on=config.is_agent)
        self._sync = AntiEntropy(self.replica, self.membership, self.metrics,
                                 interval=config.pull_interval, peers=config.sync_peers,
                                 rng=self._rng, on_changes=self._changed, stopped=self._is_stopped)
        self._tasks: list[asyncio.Task[None]] = []
        self._remove_listener: Callable[[], None] = lambda: None
        # Told the tables each batch of changes touched (the query API's subscriptions).
        self.table_listeners: list[Callable[[set[str]], None]] = []

    # ── lifecycle ────────────────────────────────────────────────────────────

    async def start(self) -> None:
        if self._started:
            raise RuntimeError("registry node is already started")
        self._started = True
        await self.membership.start()
        self._remove_listener = self.membership.add_listener(self._gossip.heard)
        self._sync.client = SyncClient(self.tls.client if self.tls else None,
                                       timeout=self.config.sync_timeout)
        self._tasks = [asyncio.create_task(self._sync.run(), name="registry-sync"),
                       asyncio.create_task(self._housekeeping(), name="registry-housekeeping")]

    async def stop(self, *, leave: bool = True) -> None:
        if self._stopped:
            return
        self._stopped = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._remove_listener()
        if self._started:
            # A leave is gossiped for a moment before stopping: only worth it if anyone listens.
            alone = not any(m.status.live for m in self.membership.members()
                            if m.name != self.config.name)
            await self.membership.stop(leave=leave and not alone)
        if self._sync.client is not None:
            await self._sync.client.aclose()
        self.subscriptions.close_all()
        self.view.close()

    def _is_stopped(self) -> bool:
        return self._stopped

    def routes(self) -> list[BaseRoute]:
        return [*self._http.routes(), *self._member_subscriptions.routes()]

    # ── writes ───────────────────────────────────────────────────────────────

    def _write(self, table: str, key: str, doc: Document | None, *, shared: bool) -> None:
        change = self.replica.write(table, key, doc, shared=shared)
        if change is not None:
            self._wrote(change)

    def _store_together(self) -> AbstractContextManager[None]:
        return self.replica.together()

    def _written(self, changes: list[Change]) -> None:
        self._changed(changes, "local")

    def accept(self, origin: str, reply: SyncReply, floor: int) -> Known:
        """Rows a process on this host wrote, handed to its agent (``hosted.py``): applied
        as a peer's, then gossiped on as if written here; what we have seen of ``origin``.

        ``reply`` is a sync reply the writer served from its own store: fresh rows alone
        (as gossip brings them, vouching for nothing) or a catch-up, with its spans."""
        strays = [row for row in reply.rows if row.owner != origin]
        if strays:
            raise ValueError(f"{origin} handed rows written by {strays[0].owner}")
        changes = self.replica.apply(reply.rows, vouched=reply.vouched or None,
                                     reset=reply.reset, horizons=reply.horizons,
                                     floors={origin: floor} if floor else None)
        self._changed(changes, "host")
        if self._started and not self._stopped:
            for change in changes:
                if change.new is not None:
                    self._gossip.broadcast(change.new, floor)
        return self.replica.known_of(origin)

    @property
    def settled(self) -> bool:
        """This replica holds what its peers do, as far as one sync goes: its view was not
        new, or a pull has been applied since, or it has no seed to have peers through
        (the cluster's first host)."""
        return self.replica.settled or not self.config.seeds

    def rows_of(self, origin: str) -> SyncReply:
        """Every row ``origin`` wrote that this replica holds, vouching for every version of
        it seen here: what a process on this host that lost its own store is sent back."""
        known = self.replica.known_of(origin)
        return SyncReply(rows=self.view.by_owner(origin), vouched={origin: known.spans()})

    # ── reads ────────────────────────────────────────────────────────────────

    def _doc(self, table: str, key: str) -> Document | None:
        row = self.view.get(table, key)
        return None if row is None else row.doc

    def _docs(self, table: str, without: Mapping[str, str | int] | None,
              filters: Mapping[str, str | int]) -> list[Document]:
        """Live rows whose indexed columns equal ``filters`` and differ from ``without``
        (a row left out is never decoded)."""
        found = self.view.select(table, normalize_filters(table, filters),
                                 unless=normalize_filters(table, without or {}))
        return [row.doc for row in found if row.doc is not None]

    def subscribe(self, table: str, **filters: str | int) -> Subscription:
        return self.subscribe_where(table, filters)

    def subscribe_where(self, table: str, where: Mapping[str, object]) -> Subscription:
        """The rows of ``table`` whose indexed columns equal ``where``, then their changes;
        ``where`` as a client sent it (checked: indexed columns, strings and integers)."""
        filters = normalize_filters(table, where)
        return self.subscriptions.open(table, filters, self.view.select(table, filters))

    # ── changes in and out ───────────────────────────────────────────────────

    def _changed(self, changes: list[Change], source: str) -> None:
        self.keys.changed(changes)
        self.subscriptions.publish(changes)
        if changes and self.table_listeners:
            tables = {row.table for c in changes if (row := c.new or c.old) is not None}
            for listener in self.table_listeners:
                listener(tables)
        remote = sum(1 for c in changes if not c.local)
        if remote:
            self.metrics.applied.labels(source).inc(remote)
        if not self._started or self._stopped:
            return  # anti-entropy carries local changes once we run
        for change in changes:
            if change.local and change.new is not None:
                self._gossip.broadcast(change.new)

    # ── anti-entropy ─────────────────────────────────────────────────────────

    def _serve(self, request: SyncRequest) -> SyncReply:
        return self.replica.serve(request, max_rows=self.config.max_sync_rows)

    async def sync_round(self, *, count: int | None = None) -> int:
        """Pull from up to ``count`` peers now; how many pulls succeeded."""
        return await self._sync.sync_round(count=count)

    async def _housekeeping(self) -> None:
        purge_every = max(1.0, min(60.0, self.config.tombstone_ttl / 4))
        loop = asyncio.get_running_loop()
        next_purge = loop.time() + purge_every
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL)
            try:
                if loop.time() >= next_purge:
                    next_purge = loop.time() + purge_every
                    self.metrics.purged.inc(self.replica.purge())
                self.metrics.observe(self.replica, len(self.subscriptions))
            except Exception:
                log.exception("registry housekeeping failed")
