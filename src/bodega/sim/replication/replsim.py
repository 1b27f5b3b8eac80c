"""Replication on the simulated network: real replicas, real gossip, simulated time.

Each node is a ``Swim`` on ``SimNet`` plus a ``Replica`` on an in-memory
SQLite view: the same core the daemons run, with the shell's three jobs
done here instead of by ``node.py`` (``rowgossip.py``, ``antientropy.py``):

- a local write is broadcast on gossip and pushed to a few members at once;
- items a node receives are decoded and applied (direct ones re-gossiped); with
  ``push_on`` (nodes that are hosts' agents) a row that was news is pushed on to
  a few members more, once;
- a host's agent (``relay``) applies a row a process on its host wrote, whose
  origin is that process, and gossips it as news of its own;
- every ``SyncPacer.step`` a node may pull: digests first, then versions
  and rows for the buckets that differ (as ``node.py`` does over HTTP). Each
  request and reply takes one network latency, and the pull fails if the two
  are partitioned apart or either is down by the time a message lands (as a
  TCP exchange would; packet loss only slows TCP, so it does not drop pulls).
  The bytes each would take on the wire are counted in ``stats``.

A seed fixes everything, so a failing scenario replays exactly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.messages import DecodeError, Item
from bodega.registry.membership.core.outputs import Delivered, ItemTooLarge, UnknownMember
from bodega.registry.replication.core.exchange import (
    DigestReply,
    DigestRequest,
    SyncReply,
    SyncRequest,
)
from bodega.registry.replication.core.rows import Change, Document, Row
from bodega.registry.replication.core.schema import TABLES, Kind
from bodega.registry.replication.replica import Replica
from bodega.registry.replication.view import View
from bodega.registry.sync.core.peers import (
    EAGER_PEERS,
    SYNC_INTERVAL,
    GapWatch,
    SyncPacer,
    choose_alive,
)
from bodega.registry.sync.core.rowwire import (
    decode_item,
    digest_reply_json,
    digest_request_json,
    is_row_item,
    item_floor,
    reply_json,
    request_json,
    row_item,
)
from bodega.sim.swim.simnet import SimNet

EPOCH = 1_700_000_000.0  # simulated wall clock = EPOCH + simulated seconds
PRIME = 2_147_483_647  # the fingerprint's sums are taken modulo this


@dataclass
class ReplStats:
    pulls: int = 0
    failed_pulls: int = 0
    rows_pulled: int = 0  # rows in sync replies, held already or not
    replies: int = 0  # sync replies applied
    rows_heard: int = 0  # rows in gossip items delivered, held already or not
    # Rows that changed a view, by how they came: gossip, sync, or a process on the host.
    applied_gossip: int = 0
    applied_sync: int = 0
    applied_local: int = 0
    rejected: int = 0
    sync_messages: int = 0  # requests and replies, digest ones included
    sync_bytes: int = 0  # their JSON bodies, as node.py would send them


class ReplicaNet:
    def __init__(self, seed: int, *, config: SwimConfig | None = None, loss: float = 0.0,
                 sync_interval: float = SYNC_INTERVAL, sync_peers: int = 1,
                 eager_peers: int = EAGER_PEERS, push_on: bool = False,
                 tombstone_ttl: float = 3600.0, wire: bool = True) -> None:
        self.net = SimNet(seed, config=config, loss=loss, wire=wire)
        self.net.keep_deliveries = False
        self.net.on_delivered = self._delivered
        self.replicas: dict[str, Replica] = {}
        self.stats = ReplStats()
        self.sync_interval = sync_interval
        self.sync_peers = sync_peers
        self.eager_peers = eager_peers
        self.push_on = push_on  # nodes are hosts' agents: rows new here go on (rowgossip.py)
        self.tombstone_ttl = tombstone_ttl
        self._rng = random.Random(seed ^ 0x5EED)
        self._process: dict[str, int] = {}
        self.count_bytes = True  # encode every sync message to count its bytes
        # Called with (node, changes) whenever a node applies rows, by gossip or sync.
        self.on_applied: Callable[[str, list[Change]], None] | None = None

    @property
    def now(self) -> float:
        return self.net.now

    def wall(self) -> float:
        return EPOCH + self.net.now

    # ── nodes ────────────────────────────────────────────────────────────────

    def add(self, name: str, seeds: Iterable[str] = ()) -> Replica:
        self.net.add(name, meta={"url": f"sim://{name}", "sync": f"sim://{name}"})
        self.replicas[name] = self._replica(name, View(":memory:"))
        self._process[name] = 0
        self._start_syncing(name)
        seeds = list(seeds)
        if seeds:
            self.net.join(name, seeds)
        return self.replicas[name]

    def kill(self, name: str) -> None:
        self.net.kill(name)

    def restart(self, name: str, seeds: Iterable[str], *, wipe: bool = False) -> Replica:
        """Start ``name`` again: a new membership generation, the same view unless ``wipe``."""
        old = self.replicas[name]
        view = View(":memory:") if wipe else old.view
        self.replicas[name] = self._replica(name, view)
        self._process[name] += 1
        self.net.restart(name, seeds)
        self._start_syncing(name)
        return self.replicas[name]

    def up(self) -> list[str]:
        return self.net.up()

    # ── writes ───────────────────────────────────────────────────────────────

    def write(self, name: str, table: str, key: str, doc: Document | None) -> None:
        """What ``RegistryNode.put_*``/``delete_*`` do, on node ``name``."""
        replica = self.replicas[name]
        shared = TABLES[table].kind is Kind.SHARED
        change = replica.write(table, key, doc, shared=shared)
        if change is not None:
            self._spread(name, [change])

    def relay(self, name: str, row: Row, floor: int) -> list[Change]:
        """What host ``name``'s agent does with a row a process on its host wrote.

        The process (a worker) is the row's origin: it numbers and stamps its rows,
        with ``floor`` below its first. The agent applies the row as it applies a
        peer's, then sends it on as news of its own: gossip and eager pushes, under
        the origin's key and floor, so every replica tracks the process, not the agent.
        """
        changes = self.replicas[name].apply([row], floors={row.owner: floor})
        self.stats.applied_local += len(changes)
        if changes:
            if self.on_applied is not None:
                self.on_applied(name, changes)
            self._news(name, row_item(row, floor))
        return changes

    def _spread(self, name: str, changes: list[Change]) -> None:
        for change in changes:
            if change.local and change.new is not None:
                self._news(name, row_item(change.new, self.replicas[name].floor))

    def _news(self, name: str, item: Item) -> None:
        """On gossip, and pushed at once to a few members (``rowgossip.py``)."""
        self.net.nodes[name].swim.broadcast(item)
        self._push(name, item)

    def _push(self, name: str, item: Item) -> None:
        # As the daemon does (rowgossip.py): live replica holders, sampled in O(eager_peers).
        peers = self.net.nodes[name].swim.alive_holders()
        for peer in self._rng.sample(peers, min(self.eager_peers, len(peers))):
            with contextlib.suppress(UnknownMember, ItemTooLarge):
                self.net.send_direct(name, peer, item)

    def _delivered(self, name: str, delivered: Delivered) -> None:
        if not is_row_item(delivered.item):
            return
        replica = self.replicas[name]
        try:
            decoded = decode_item(delivered.item)
            floor = item_floor(delivered.item)
        except DecodeError:
            self.stats.rejected += 1
            return
        if isinstance(decoded, tuple):
            replica.apply([], floors={decoded[0]: floor})
            replica.notice(*decoded)
            return
        known = replica.known_of(decoded.owner)
        ours = decoded.owner == name
        fresh = decoded.version not in known and not ours
        self.stats.rows_heard += 1
        if not fresh and not ours and (not floor or known.covers(1, floor)):
            return  # seen already: not applied again (rowgossip.py)
        changes = replica.apply([decoded] if fresh or ours else [],
                                floors={decoded.owner: floor})
        self.stats.applied_gossip += len(changes)
        if self.on_applied is not None and changes:
            self.on_applied(name, changes)
        self._spread(name, changes)
        if delivered.direct and fresh:
            self.net.nodes[name].swim.broadcast(delivered.item)
        if self.push_on and fresh and decoded.version in replica.known_of(decoded.owner):
            self._push(name, delivered.item)  # news here: on to a few members more, once

    # ── anti-entropy ─────────────────────────────────────────────────────────

    def _replica(self, name: str, view: View) -> Replica:
        def rejected(_table: str, _reason: str) -> None:
            self.stats.rejected += 1
        return Replica(name, view, wall=self.wall, tombstone_ttl=self.tombstone_ttl,
                       on_reject=rejected)

    def _start_syncing(self, name: str) -> None:
        pacer = SyncPacer(self.sync_interval, self.sync_peers, random.Random(self._rng.random()))
        watch = GapWatch()
        process = self._process[name]

        def tick() -> None:
            if self._process[name] != process or not self.net.nodes[name].up:
                return
            replica = self.replicas[name]
            count = pacer.due(self.now, watch.behind(replica))
            if count:
                self._sync_round(name, count)
            self.net.at(self.now + pacer.step, tick)

        self.net.at(self.now + self._rng.uniform(0, pacer.step), tick)

    def _sync_round(self, name: str, count: int) -> None:
        replica = self.replicas[name]
        swim = self.net.nodes[name].swim
        peers = choose_alive(swim.alive_holders(), swim.member, replica.missing(), count,
                             self._rng)
        for peer in peers:
            self.stats.pulls += 1
            if replica.full_sync:
                self._send_request(name, peer.name, replica.sync_request())
                continue
            digest = replica.digest_request()
            self._count(digest_request_json, digest)
            self.net.at(self.now + self.net.delay(), partial(self._compare, name, peer.name,
                                                             digest))

    def _count(self, encode: Any, message: Any) -> None:
        self.stats.sync_messages += 1
        if self.count_bytes:
            self.stats.sync_bytes += len(json.dumps(encode(message), separators=(",", ":")))

    def _compare(self, name: str, peer: str, request: DigestRequest) -> None:
        if not self.net.connected(name, peer):
            self.stats.failed_pulls += 1
            return
        process = self._process[name]
        reply = self.replicas[peer].compare(request)
        self._count(digest_reply_json, reply)
        self.net.at(self.now + self.net.delay(),
                    lambda: self._compared(name, peer, process, reply))

    def _compared(self, name: str, peer: str, process: int, reply: DigestReply) -> None:
        if self._process[name] != process or not self.net.connected(name, peer):
            self.stats.failed_pulls += 1
            return
        if reply.differ:
            self._send_request(name, peer, self.replicas[name].sync_request(reply.differ))

    def _send_request(self, name: str, peer: str, request: SyncRequest) -> None:
        self._count(request_json, request)
        self.net.at(self.now + self.net.delay(), partial(self._serve, name, peer, request))

    def _serve(self, name: str, peer: str, request: SyncRequest) -> None:
        if not self.net.connected(name, peer):
            self.stats.failed_pulls += 1
            return
        process = self._process[name]
        reply = self.replicas[peer].serve(request)
        self._count(reply_json, reply)
        self.net.at(self.now + self.net.delay(),
                    lambda: self._answer(name, peer, process, reply))

    def _answer(self, name: str, peer: str, process: int, reply: SyncReply) -> None:
        if self._process[name] != process or not self.net.connected(name, peer):
            self.stats.failed_pulls += 1
            return
        self.stats.rows_pulled += len(reply.rows)
        self.stats.replies += 1
        changes = self.replicas[name].apply_reply(
            reply, peer=peer, peers=len(self.net.nodes[name].swim.alive_holders()))
        self.stats.applied_sync += len(changes)
        if self.on_applied is not None and changes:
            self.on_applied(name, changes)
        self._spread(name, changes)

    def purge(self) -> int:
        return sum(self.replicas[n].purge() for n in self.up())

    # ── looking ──────────────────────────────────────────────────────────────

    def digest(self, name: str) -> str:
        """A hash of every row ``name`` holds, tombstones included."""
        rows = [(r.table, r.key, r.owner, r.version, r.stamp.wall_ms, r.stamp.logical, r.doc)
                for r in self.replicas[name].view.all_rows()]
        return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()

    def fingerprint(self, name: str) -> tuple[int, ...]:
        """Cheap aggregates of what ``name`` holds: different rows almost always differ here.
        Integer sums modulo a prime: a float total of microsecond versions rounds
        differently with the order rows were stored in, so equal views could differ."""
        out: list[int] = []
        for table in TABLES:
            out += self.replicas[name].view.db.execute(
                f"SELECT count(*), coalesce(sum(_version % {PRIME}), 0), "
                f"coalesce(sum((_hlc_wall + _hlc_logical) % {PRIME}), 0), "
                f"coalesce(sum(length(_doc)), 0) FROM {table}").fetchone()
        return tuple(out)

    def converged(self, names: Iterable[str] | None = None) -> bool:
        """Every named (default: live) replica holds exactly the same rows."""
        names = list(names if names is not None else self.up())
        if len({self.fingerprint(n) for n in names}) > 1:
            return False
        return len({self.digest(n) for n in names}) <= 1

    def run_until_converged(self, *, timeout: float, step: float = 0.5) -> bool:
        return self.net.run_until(self.converged, timeout=timeout, step=step)

