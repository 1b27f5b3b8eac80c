"""One registry agent per host, under a steady stream of creates: a scenario on ``ReplicaNet``.

In the agent shape a host runs one replica (its agent); the host's processes
read the agent's view and write their rows through it, so gossip,
anti-entropy and applying rows are paid once per host. Here every host is a
``ReplicaNet`` node, and each has ``writers_per_host`` processes that write
(its workers). A create is a ``machines`` row written by one of them: the
process is the row's origin (it numbers and stamps its own rows, as a worker
does), and its host's agent applies the row and gossips it
(``ReplicaNet.relay``). Every replica then tracks versions per process, as
it would in the daemons.

What the scenario approximates: the processes keep their counters and
clocks in memory (a worker's would outlive a restart); nothing fails or
restarts; pulls pick peers among the agents (the members), so "pull from the
origin first" (``peers.choose_alive``) finds no member named like a
process and falls back to random agents.

Creates arrive as a Poisson stream at ``creates_per_second`` across the
cluster, each on a random host and writer. After ``warmup`` seconds of load,
``measure`` seconds are measured: the rows created then are followed until
every host holds them, and rows applied, pulls and bytes are counted over
the window. Then the load stops and the run goes on until every host holds
every row (or ``drain`` runs out). Deterministic under ``seed``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.replication.core.hlc import HybridClock
from bodega.registry.replication.core.rows import Change, Row
from bodega.registry.replication.writes import fresh_base
from bodega.registry.sync.core.peers import AGENT_SYNC_INTERVAL, EAGER_PEERS
from bodega.sim.replication.replsim import ReplicaNet

APPS_PER_WRITER = 10


@dataclass(frozen=True)
class AgentLoad:
    hosts: int = 1000
    creates_per_second: float = 1000.0
    writers_per_host: int = 1
    warmup: float = 2.0  # seconds of load before the measured window
    measure: float = 3.0  # seconds of load measured
    drain: float = 30.0  # simulated seconds allowed, after the load, to reach every host
    idle: float = 2.0  # seconds the warm cluster runs before the load (first pulls)
    seed: int = 1
    swim: SwimConfig = field(default_factory=SwimConfig)
    sync_interval: float = AGENT_SYNC_INTERVAL
    sync_peers: int = 1
    eager_peers: int = EAGER_PEERS
    push_on: bool = True  # an agent pushes a row new to it on (rowgossip.py)


@dataclass(frozen=True)
class Spread:
    """Rows applied per host per second over the measured window."""

    mean: float
    low: float  # the host that applied fewest
    high: float


@dataclass(frozen=True)
class AgentLoadReport:
    load: AgentLoad
    creates: int  # every create of the run
    tracked: int  # created in the measured window
    reach_all: list[float]  # seconds until every host held each tracked row (inf: never)
    applied: Spread  # rows that changed a host's view, per host per second
    gossip_applied: float  # of which, per host per second: rows first heard on gossip
    sync_applied: float  # ... first pulled by anti-entropy
    local_applied: float  # ... written on the host itself
    gossip_heard: float  # rows in gossip items, per host per second, held already or not
    sync_received: float  # rows in sync replies, per host per second, held already or not
    rows_per_reply: float  # the mean batch a sync reply applies
    pulls: float  # per host per second
    gossip_bytes: float  # sealed packets sent, per host per second
    gossip_packets: float
    sync_bytes: float  # sync request and reply bodies (JSON), per host per second
    held_by_all: bool  # after the drain, every host applied every create once
    identical: bool  # ... and every host's view holds the same rows
    per_host_applied: dict[str, int]  # every create a host applied, over the whole run

    def percentile(self, q: float) -> float:
        return percentile(self.reach_all, q)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class HostWriter:
    """A process on a host that writes rows through the host's agent: their origin.

    It numbers its rows from ``fresh_base`` (above any earlier life's, as a
    replica on an empty view does) and stamps them on its own hybrid clock, so
    a row it writes is exactly what a replica of its own would have written.
    """

    def __init__(self, name: str, wall: Callable[[], float]) -> None:
        self.name = name
        self.floor = fresh_base(wall())
        self._counter = self.floor
        self._clock = HybridClock(name, lambda: int(wall() * 1000))

    def row(self, table: str, key: str, doc: dict[str, object]) -> Row:
        self._counter += 1
        return Row(table, key, doc, self.name, self._counter, self._clock.tick())


def machine_doc(machine_id: str, worker: str, app: str, rng: random.Random) -> dict[str, object]:
    """A machine as a worker's API renders it, without events (about 600 bytes of JSON)."""
    return {"id": machine_id, "name": f"m-{machine_id[:8]}", "app": app, "worker": worker,
            "region": "ams", "state": rng.choice(["started"] * 8 + ["stopped", "created"]),
            "instance_id": f"01J{machine_id.upper()}",
            "private_ip": f"fdaa:0:1::{rng.randrange(65536):x}",
            "created_at": "2026-11-20T10:00:00Z", "updated_at": "2026-11-23T11:00:00Z",
            "config": {"image": f"registry.internal/{app}:v{rng.randrange(100)}",
                       "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256},
                       "env": {"PORT": "8080", "PRIMARY_REGION": "ams"},
                       "services": [{"protocol": "tcp", "internal_port": 8080,
                                     "ports": [{"port": 443, "handlers": ["tls", "http"]}]}],
                       "restart": {"policy": "on-failure", "max_retries": 3},
                       "metadata": {"fly_platform_version": "v2", "fly_process_group": "app"}}}


def host_name(i: int) -> str:
    return f"h{i:05d}"


@dataclass
class _Tally:
    """What the run counts as it goes: per host, and per tracked row."""

    hosts: int
    per_host: dict[str, int] = field(default_factory=dict)
    tracked: dict[tuple[str, int], list[float]] = field(default_factory=dict)  # [at, hosts]
    reached: dict[tuple[str, int], float] = field(default_factory=dict)

    def applied(self, now: float, host: str, changes: list[Change]) -> None:
        for change in changes:
            if change.new is None or change.new.table != "machines":
                continue
            self.per_host[host] = self.per_host.get(host, 0) + 1
            entry = self.tracked.get((change.new.owner, change.new.version))
            if entry is None:
                continue
            entry[1] += 1
            if entry[1] == self.hosts:
                self.reached[(change.new.owner, change.new.version)] = now - entry[0]


def warm(load: AgentLoad) -> tuple[ReplicaNet, list[str]]:
    """Every host already knows every other (``Swim.restore``): no N² join first."""
    net = ReplicaNet(load.seed, config=load.swim, sync_interval=load.sync_interval,
                     sync_peers=load.sync_peers, eager_peers=load.eager_peers, push_on=load.push_on)
    net.net.keep_observations = False
    hosts = [host_name(i) for i in range(load.hosts)]
    for host in hosts:
        net.add(host)
    records = [net.net.nodes[host].swim.record for host in hosts]
    for host in hosts:
        net.net.nodes[host].swim.restore(net.now, records)
    return net, hosts


def run(load: AgentLoad) -> AgentLoadReport:
    net, hosts = warm(load)
    tally = _Tally(len(hosts))
    net.on_applied = lambda host, changes: tally.applied(net.now, host, changes)
    net.net.run_for(load.idle)
    writers = {host: [HostWriter(f"{host}-w{j}", net.wall)
                      for j in range(load.writers_per_host)] for host in hosts}
    rng = random.Random(load.seed ^ 0xC4EA7E)
    start = net.now
    window = (start + load.warmup, start + load.warmup + load.measure)
    stop = window[1]
    creates = 0

    def create() -> None:
        nonlocal creates
        host = hosts[rng.randrange(len(hosts))]
        writer = writers[host][rng.randrange(len(writers[host]))]
        machine_id = f"{rng.getrandbits(64):016x}"
        app = f"app-{writer.name}-{rng.randrange(APPS_PER_WRITER)}"
        row = writer.row("machines", machine_id, machine_doc(machine_id, writer.name, app, rng))
        if window[0] <= net.now < window[1]:
            tally.tracked[(row.owner, row.version)] = [net.now, 0]
        creates += 1
        net.relay(host, row, writer.floor)
        after = net.now + rng.expovariate(load.creates_per_second)
        if after < stop:
            net.net.at(after, create)

    net.net.at(start, create)
    net.net.run_until_time(window[0])
    before = _Counts.take(net, tally)
    net.net.run_until_time(window[1])
    after = _Counts.take(net, tally)
    net.net.run_until(lambda: all(tally.per_host.get(h, 0) >= creates for h in hosts),
                      timeout=load.drain)
    held = all(tally.per_host.get(h, 0) == creates for h in hosts)
    identical = held and len({net.fingerprint(h) for h in hosts}) == 1
    return after.report(before, load, hosts, creates, tally, held, identical)


@dataclass(frozen=True)
class _Counts:
    at: float
    per_host: dict[str, int]
    gossip_bytes: int
    gossip_packets: int
    sync_bytes: int
    pulls: int
    replies: int
    rows_pulled: int
    rows_heard: int
    applied_gossip: int
    applied_sync: int
    applied_local: int

    @classmethod
    def take(cls, net: ReplicaNet, tally: _Tally) -> _Counts:
        s, t = net.stats, net.net.traffic
        return cls(net.now, dict(tally.per_host), t.bytes, t.sent, s.sync_bytes, s.pulls,
                   s.replies, s.rows_pulled, s.rows_heard, s.applied_gossip, s.applied_sync,
                   s.applied_local)

    def report(self, before: _Counts, load: AgentLoad, hosts: list[str], creates: int,
               tally: _Tally, held: bool, identical: bool) -> AgentLoadReport:
        seconds = self.at - before.at
        per = len(hosts) * seconds

        def rate(field_name: str) -> float:
            return float(getattr(self, field_name) - getattr(before, field_name)) / per

        applied = [(self.per_host.get(h, 0) - before.per_host.get(h, 0)) / seconds
                   for h in hosts]
        replies = self.replies - before.replies
        return AgentLoadReport(
            load=load, creates=creates, tracked=len(tally.tracked),
            reach_all=[tally.reached.get(k, math.inf) for k in tally.tracked],
            applied=Spread(sum(applied) / len(applied), min(applied), max(applied)),
            gossip_applied=rate("applied_gossip"), sync_applied=rate("applied_sync"),
            local_applied=rate("applied_local"), gossip_heard=rate("rows_heard"),
            sync_received=rate("rows_pulled"),
            rows_per_reply=(self.rows_pulled - before.rows_pulled) / replies if replies else 0.0,
            pulls=rate("pulls"), gossip_bytes=rate("gossip_bytes"),
            gossip_packets=rate("gossip_packets"), sync_bytes=rate("sync_bytes"),
            held_by_all=held, identical=identical, per_host_applied=dict(tally.per_host))
