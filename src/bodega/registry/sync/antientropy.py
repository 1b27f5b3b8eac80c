"""Anti-entropy for a running node: pulls from live peers over HTTP, paced.

Every ``interval`` (jittered) a node pulls from a random live peer, and
every quarter of it while behind: versions missing since the last look
(``GapWatch``), a noticed row, lost rows of its own or a cut reply; from
the origins of the missing versions first (``peers.py``). A pull compares
digests first and exchanges versions and rows only for the buckets that
differ (``exchange.py``); the rows are applied by the replica and handed
to the node (``on_changes``), which feeds subscriptions and counts them. A
failed pull is retried with another peer next round: this loop is the only
repair there is, so no error ends it.

A node with no live peer to pull from, that has not joined yet or keeps
hearing gossip sealed with a key it lacks (it was away during a key
rotation), pulls from the members it knows of some other way: those in its
member table whatever their status, and those remembered from its last life
(``Membership.known_meta``). Their HTTP APIs take the cluster token, not
the gossip key, so the pull brings the keyring row like any other, and the
node can gossip again.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

from bodega.registry.membership.udp import Membership
from bodega.registry.replication.core.rows import Change
from bodega.registry.replication.metrics import ReplicationMetrics
from bodega.registry.replication.replica import Replica
from bodega.registry.sync.client import SyncClient, SyncFailed
from bodega.registry.sync.core.peers import GapWatch, SyncPacer, choose_alive

log = logging.getLogger("bodega.registry")

Applied = Callable[[list[Change], str], None]  # (changes, source: "sync")


class AntiEntropy:
    def __init__(self, replica: Replica, membership: Membership, metrics: ReplicationMetrics, *,
                 interval: float, peers: int, rng: random.Random, on_changes: Applied,
                 stopped: Callable[[], bool]) -> None:
        self.replica = replica
        self.membership = membership
        self.metrics = metrics
        self.interval = interval
        self.peers = peers
        self._rng = rng
        self._on_changes = on_changes
        self._stopped = stopped  # the node is stopping: what a pull brings now is dropped
        self.client: SyncClient | None = None  # set while the node runs

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        pacer, watch = SyncPacer(self.interval, self.peers, self._rng), GapWatch()
        while True:
            await asyncio.sleep(pacer.step)
            count = pacer.due(loop.time(), watch.behind(self.replica))
            if count:
                try:
                    await self.sync_round(count=count)
                except Exception:  # this loop is the only repair there is: it must not end
                    log.exception("a sync round failed")

    async def sync_round(self, *, count: int | None = None) -> int:
        """Pull from up to ``count`` peers now; how many pulls succeeded."""
        swim = self.membership.swim
        count = count or self.peers
        peers = [(p.name, p.meta["sync"]) for p in choose_alive(
            swim.alive_holders(), swim.member, self.replica.missing(), count, self._rng)]
        if not peers and (not swim.joined or self.membership.lacks_key()):
            known = sorted((name, meta["sync"]) for name, meta in
                           self.membership.known_meta().items() if meta.get("sync"))
            peers = self._rng.sample(known, min(count, len(known)))
        results = await asyncio.gather(*(self._pull(name, url) for name, url in peers))
        return sum(results)

    async def _pull(self, name: str, url: str) -> bool:
        assert self.client is not None
        sent = received = 0
        try:
            buckets: tuple[int, ...] | None = None
            if not self.replica.full_sync:
                compared = await self.client.compare(url, self.replica.digest_request())
                sent, received = compared.sent, compared.received
                if not compared.differ:  # we hold the same versions: nothing to exchange
                    self._count_pull(sent, received)
                    return True
                buckets = compared.differ
            pulled = await self.client.pull(url, self.replica.sync_request(buckets))
        except SyncFailed as e:
            log.debug("sync from %s failed: %s", name, e)
            self.metrics.syncs.labels("error").inc()
            return False
        if self._stopped():
            return False
        try:
            changes = self.replica.apply_reply(
                pulled.reply, peer=name, peers=len(self.membership.swim.alive_holders()))
        except Exception:  # a full disk: nothing was stored or believed; pull again later
            log.exception("storing what %s sent failed", name)
            self._count_pull(sent + pulled.sent, received + pulled.received, "error")
            return False
        self._count_pull(sent + pulled.sent, received + pulled.received)
        self._on_changes(changes, "sync")
        return True

    def _count_pull(self, sent: int, received: int, result: str = "ok") -> None:
        self.metrics.syncs.labels(result).inc()
        self.metrics.sync_bytes.labels("out").inc(sent)
        self.metrics.sync_bytes.labels("in").inc(received)
