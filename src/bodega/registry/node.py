"""``RegistryNode``: the registry every daemon embeds (membership, replica, sync, subscriptions).

The I/O shell around the pure pieces. It owns:

- a ``Membership`` (SWIM on UDP), which also carries row changes: a local
  write is broadcast on gossip (``rowwire.row_item``) and pushed at once to a
  few random members, which join the epidemic; every node applies what it
  hears in batches, one transaction per loop turn;
- the ``Replica`` on a SQLite file in the data dir, read synchronously by
  the daemon (``get``, ``rows``) and written by it (``put_owned`` ...);
- anti-entropy: every ``sync_interval`` (jittered) a pull over HTTP from a
  random live peer, and every quarter of it while versions are known to be
  missing, from their origins first (``peers.py``). A pull compares digests
  first (``ledger.py``) and exchanges versions and rows only for the buckets
  of origins that differ;
- subscriptions, fed in the same call that applied each change, and served
  as NDJSON by ``routes()``, which the daemon mounts on its HTTP server
  together with the sync route. ``meta["url"]`` tells peers where that is.

Reads and writes work before ``start`` (rows written then spread once the
node starts: anti-entropy carries them) and fail after ``stop``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from starlette.routing import BaseRoute

from bodega.registry.membership.config import MembershipConfig, SwimConfig
from bodega.registry.membership.members import Addr, MemberView
from bodega.registry.membership.messages import DecodeError, Item
from bodega.registry.membership.outputs import Delivered, Event, ItemTooLarge, UnknownMember
from bodega.registry.membership.transport import Binder, UdpTransport
from bodega.registry.membership.udp import Membership
from bodega.registry.replication.client import SyncClient, SyncFailed
from bodega.registry.replication.exchange import SyncReply, SyncRequest
from bodega.registry.replication.httpapi import RegistryHttp
from bodega.registry.replication.metrics import ReplicationMetrics
from bodega.registry.replication.peers import SyncPacer, choose_alive
from bodega.registry.replication.replica import Replica
from bodega.registry.replication.rows import Change, Row
from bodega.registry.replication.rowwire import decode_item, is_row_item, item_floor, row_item
from bodega.registry.replication.subscriptions import Subscription, Subscriptions, normalize_filters
from bodega.registry.replication.view import View
from bodega.runtime.keys import internal_token
from bodega.runtime.lifecycle import private_dir

log = logging.getLogger("bodega.registry")

HOUSEKEEPING_INTERVAL = 1.0


@dataclass(frozen=True)
class RegistryConfig:
    name: str
    role: str
    region: str
    data_dir: Path
    cluster_secret: str
    bind_host: str = "127.0.0.1"
    bind_port: int = 0
    advertise_host: str | None = None
    seeds: tuple[str, ...] = ()  # gossip "host:port" to join through
    meta: dict[str, str] = field(default_factory=dict)  # {"url": daemon's HTTP API}
    swim: SwimConfig = field(default_factory=SwimConfig)
    sync_interval: float = 1.0
    tombstone_ttl: float = 3600.0
    sync_peers: int = 1  # pulls per round; two while versions are missing
    eager_peers: int = 3  # members a local change is pushed to at once, besides gossip
    max_sync_rows: int = 2000  # rows per sync reply
    subscription_capacity: int = 10_000  # changes a subscriber may fall behind before cut off
    sync_timeout: float = 5.0

    @property
    def view_path(self) -> Path:
        return self.data_dir / "registry.db"


class RegistryNode:
    def __init__(self, config: RegistryConfig, *, registry: CollectorRegistry | None = None,
                 bind: Binder = UdpTransport.bind, rng: random.Random | None = None) -> None:
        self.config = config
        registry = registry or CollectorRegistry()
        self.metrics = ReplicationMetrics(registry)
        self._rng = rng or random.Random()
        self.membership = Membership(MembershipConfig(
            name=config.name, role=config.role, region=config.region, data_dir=config.data_dir,
            cluster_secret=config.cluster_secret, bind_host=config.bind_host,
            bind_port=config.bind_port, advertise_host=config.advertise_host,
            seeds=config.seeds, meta=dict(config.meta), swim=config.swim,
        ), registry=registry, bind=bind, rng=self._rng)
        private_dir(config.data_dir)  # the view holds every app's machines: not for machines
        self.view = View(config.view_path)
        self.replica = Replica(config.name, self.view, tombstone_ttl=config.tombstone_ttl,
                               on_reject=self.metrics.reject)
        self.subscriptions = Subscriptions(config.subscription_capacity,
                                           on_lagged=self.metrics.lagged.inc)
        self._token = internal_token(config.cluster_secret)
        self._http = RegistryHttp(token=self._token, serve=self._serve,
                                  compare=self.replica.compare,
                                  subscribe=lambda table, where: self.subscribe(table, **where),
                                  metrics=self.metrics)
        self._client: SyncClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._remove_listener: Callable[[], None] = lambda: None
        self._inbox: list[tuple[Row | tuple[str, int], Item, bool]] = []
        self._started = self._stopped = False

    # ── lifecycle ────────────────────────────────────────────────────────────

    async def start(self) -> None:
        if self._started:
            raise RuntimeError("registry node is already started")
        self._started = True
        await self.membership.start()
        self._remove_listener = self.membership.add_listener(self._on_gossip)
        self._client = SyncClient(self._token, timeout=self.config.sync_timeout)
        self._tasks = [asyncio.create_task(self._anti_entropy(), name="registry-sync"),
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
        if self._client is not None:
            await self._client.aclose()
        self.subscriptions.close_all()
        self.view.close()

    @property
    def gossip_addr(self) -> Addr:
        return self.membership.addr

    def routes(self) -> list[BaseRoute]:
        return self._http.routes()

    # ── writes ───────────────────────────────────────────────────────────────

    def put_owned(self, table: str, key: str, doc: dict[str, Any]) -> None:
        self._write(table, key, dict(doc), shared=False)

    def delete_owned(self, table: str, key: str) -> None:
        self._write(table, key, None, shared=False)

    def put_shared(self, table: str, key: str, doc: dict[str, Any]) -> None:
        self._write(table, key, dict(doc), shared=True)

    def delete_shared(self, table: str, key: str) -> None:
        self._write(table, key, None, shared=True)

    def _write(self, table: str, key: str, doc: dict[str, Any] | None, *, shared: bool) -> None:
        change = self.replica.write(table, key, doc, shared=shared)
        if change is not None:
            self._changed([change], "local")

    # ── reads ────────────────────────────────────────────────────────────────

    def get(self, table: str, key: str) -> dict[str, Any] | None:
        row = self.view.get(table, key)
        return None if row is None else row.doc

    def rows(self, table: str, **filters: str | int) -> list[dict[str, Any]]:
        found = self.view.select(table, normalize_filters(table, filters))
        return [row.doc for row in found if row.doc is not None]

    def subscribe(self, table: str, **filters: str | int) -> Subscription:
        where = normalize_filters(table, filters)
        return self.subscriptions.open(table, where, self.view.select(table, where))

    def members(self) -> list[MemberView]:
        return self.membership.members()

    # ── changes in and out ───────────────────────────────────────────────────

    def _changed(self, changes: list[Change], source: str) -> None:
        self.subscriptions.publish(changes)
        remote = sum(1 for c in changes if not c.local)
        if remote:
            self.metrics.applied.labels(source).inc(remote)
        for change in changes:
            if change.local and change.new is not None:
                self._broadcast(change.new)

    def _broadcast(self, row: Row) -> None:
        if not self._started or self._stopped:
            return  # anti-entropy carries it once we run
        item = row_item(row, self.replica.floor)
        form = "notice" if "n" in item.data else "zrow" if "z" in item.data else "row"
        self.metrics.items.labels(form).inc()
        try:
            self.membership.broadcast(item)
        except ItemTooLarge:  # cannot happen below ITEM_BUDGET; a notice always fits
            log.warning("row item %s did not fit a packet", item.key)
            return
        self._push(item)

    def _push(self, item: Item) -> None:
        """Hand ``item`` straight to a few members: they start gossiping it a round earlier."""
        peers = [m.name for m in self.membership.alive() if m.name != self.config.name]
        for name in self._rng.sample(peers, min(self.config.eager_peers, len(peers))):
            with contextlib.suppress(UnknownMember, ItemTooLarge):
                self.membership.send_direct(name, item)

    def _on_gossip(self, out: Event | Delivered) -> None:
        if isinstance(out, Event) or not is_row_item(out.item):
            return
        try:
            decoded = decode_item(out.item)
        except DecodeError:
            self.metrics.bad_items.inc()
            return
        if not self._inbox:
            asyncio.get_running_loop().call_soon(self._flush)
        self._inbox.append((decoded, out.item, out.direct))

    def _flush(self) -> None:
        """Apply every row heard since the last loop turn, in one transaction."""
        inbox, self._inbox = self._inbox, []
        if self._stopped:
            return
        try:
            fresh = self._apply_heard(inbox)
        except Exception:  # a replica error must not take the gossip listener down
            log.exception("applying %d gossiped items failed", len(inbox))
            return
        for item in fresh:
            # A pushed item is not re-gossiped by membership; join its epidemic
            # under the same key, so the cluster-wide seen-set still de-duplicates.
            with contextlib.suppress(ItemTooLarge):
                self.membership.broadcast(item)

    def _apply_heard(self, inbox: list[tuple[Row | tuple[str, int], Item, bool]]) -> list[Item]:
        """Apply rows and notices; the pushed items that were news here."""
        rows: list[Row] = []
        fresh: list[Item] = []
        floors: dict[str, int] = {}
        for decoded, item, direct in inbox:
            owner = decoded.owner if isinstance(decoded, Row) else decoded[0]
            with contextlib.suppress(DecodeError):
                floors[owner] = max(floors.get(owner, 0), item_floor(item))
            if isinstance(decoded, Row):
                rows.append(decoded)
                new = decoded.version not in self.replica.known_of(decoded.owner)
            else:
                self.replica.notice(*decoded)
                new = decoded[0] != self.config.name
            if direct and new:
                fresh.append(item)
        self._changed(self.replica.apply(rows, floors=floors), "gossip")
        return fresh

    # ── anti-entropy ─────────────────────────────────────────────────────────

    def _serve(self, request: SyncRequest) -> SyncReply:
        return self.replica.serve(request, max_rows=self.config.max_sync_rows)

    async def _anti_entropy(self) -> None:
        loop = asyncio.get_running_loop()
        pacer = SyncPacer(self.config.sync_interval, self.config.sync_peers, self._rng)
        while True:
            await asyncio.sleep(pacer.step)
            count = pacer.due(loop.time(), self.replica.behind)
            if count:
                try:
                    await self.sync_round(count=count)
                except Exception:  # this loop is the only repair there is: it must not end
                    log.exception("a sync round failed")

    async def sync_round(self, *, count: int | None = None) -> int:
        """Pull from up to ``count`` peers now; how many pulls succeeded."""
        swim = self.membership.swim
        peers = choose_alive(swim.alive_names(), swim.member, self.replica.missing(),
                             count or self.config.sync_peers, self._rng)
        results = await asyncio.gather(*(self._pull(p) for p in peers))
        return sum(results)

    async def _pull(self, peer: MemberView) -> bool:
        assert self._client is not None
        url = peer.meta["url"]
        sent = received = 0
        try:
            buckets: tuple[int, ...] | None = None
            if not self.replica.full_sync:
                compared = await self._client.compare(url, self.replica.digest_request())
                sent, received = compared.sent, compared.received
                if not compared.differ:  # we hold the same versions: nothing to exchange
                    self._count_pull(sent, received)
                    return True
                buckets = compared.differ
            pulled = await self._client.pull(url, self.replica.sync_request(buckets))
        except SyncFailed as e:
            log.debug("sync from %s failed: %s", peer.name, e)
            self.metrics.syncs.labels("error").inc()
            return False
        if self._stopped:
            return False
        try:
            changes = self.replica.apply_reply(pulled.reply)
        except Exception:  # a full disk: nothing was stored or believed; pull again later
            log.exception("storing what %s sent failed", peer.name)
            self._count_pull(sent + pulled.sent, received + pulled.received, "error")
            return False
        self._count_pull(sent + pulled.sent, received + pulled.received)
        self._changed(changes, "sync")
        return True

    def _count_pull(self, sent: int, received: int, result: str = "ok") -> None:
        self.metrics.syncs.labels(result).inc()
        self.metrics.sync_bytes.labels("out").inc(sent)
        self.metrics.sync_bytes.labels("in").inc(received)

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
