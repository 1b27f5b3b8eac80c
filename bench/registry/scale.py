"""The registry at fleet scale, by simulation: does the cost per node stay flat as N grows?

Runs the same simulators the tests use (``SimNet`` and ``ReplicaNet``: the
real ``Swim``, ``Replica``, codec and HMAC, on simulated time) for each N and
prints every figure beside what theory expects:

- a change reaching every node, p50/p99, against the epidemic estimate
  log_{f+1}(N) + ln(N)/f rounds of push gossip with fan-out f;
- a killed node declared dead by every node, against SWIM: the first probe
  (e/(e-1) periods on average) plus Lifeguard's Min suspicion, plus the
  spread of the news;
- suspicions and false deaths of live nodes under 5% packet loss;
- gossip and sync bytes and messages per node per second, idle and busy
  (a change every 0.5 s), which should not grow with N;
- CPU per node per simulated second (the simulator's own overhead included).

The cluster starts warm (every node already knows every other, ``Swim.restore``)
so that no N² join precedes the measurements; ``--writers`` nodes own a row
each (a worker's ``workers`` row), which every node already holds. Deterministic under ``--seed``.

    python -m bench.registry.scale [--sizes 50,200,1000,5000] [--seed 1]
    python -m bench.registry.scale --rows [--workers 1000] [--machines 100000]
    python -m bench.registry.scale --agents [--hosts 1000] [--creates 1000] [--writers-per-host 1]
"""

from __future__ import annotations

import argparse
import gc
import math
import random
import resource
import time
from dataclasses import dataclass, field, replace

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import EventKind
from bodega.registry.membership.core.suspicion import suspicion_max, suspicion_min
from bodega.registry.replication.core.rows import Change
from bodega.registry.sync.core.peers import EAGER_PEERS, SYNC_INTERVAL
from bodega.sim.replication.agentsim import AgentLoad
from bodega.sim.replication.replsim import ReplicaNet
from bodega.sim.swim.simnet import Observation

LAN = SwimConfig()


def epidemic_rounds(n: int, fanout: int) -> float:
    return math.log(n, fanout + 1) + math.log(n) / fanout


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Watch:
    """Arrivals of tracked changes and membership events, fed by the simulators' hooks."""

    live: set[str] = field(default_factory=set)
    tracked: dict[tuple[str, int], tuple[float, set[str]]] = field(default_factory=dict)
    reached: dict[tuple[str, int], float] = field(default_factory=dict)
    events: list[Observation] = field(default_factory=list)

    def applied(self, net: ReplicaNet, name: str, changes: list[Change]) -> None:
        for change in changes:
            if change.new is None:
                continue
            key = (change.new.owner, change.new.version)
            entry = self.tracked.get(key)
            if entry is None:
                continue
            entry[1].add(name)
            if key not in self.reached and self.live <= entry[1]:
                self.reached[key] = net.now - entry[0]

    def event(self, observation: Observation) -> None:
        if observation.event.kind in (EventKind.SUSPECT, EventKind.DEAD):
            self.events.append(observation)


@dataclass
class Traffic:
    bytes: float
    messages: float
    sync_bytes: float
    sync_messages: float


def measure(net: ReplicaNet, seconds: float, n: int) -> tuple[Traffic, float]:
    """Run ``seconds``; per node per second gossip and sync traffic, and CPU per node."""
    t0, s0 = net.net.traffic, net.stats
    before = (t0.bytes, t0.sent, s0.sync_bytes, s0.sync_messages)
    cpu = time.process_time()
    net.net.run_for(seconds)
    cpu = time.process_time() - cpu
    t1, s1 = net.net.traffic, net.stats
    after = (t1.bytes, t1.sent, s1.sync_bytes, s1.sync_messages)
    per = [(b - a) / n / seconds for a, b in zip(before, after, strict=True)]
    return Traffic(*per), cpu / n / seconds


def warm_cluster(n: int, seed: int, writers: int) -> tuple[ReplicaNet, list[str], Watch]:
    net = ReplicaNet(seed)
    net.net.keep_observations = False
    watch = Watch()
    net.on_applied = lambda name, changes: watch.applied(net, name, changes)
    net.net.on_event = watch.event
    names = [f"n{i:05d}" for i in range(n)]
    for name in names:
        net.add(name)
    records = [net.net.nodes[name].swim.record for name in names]
    for name in names:
        net.net.nodes[name].swim.restore(net.now, records)
    watch.live = set(names)
    # The writers' rows are already everywhere (as after a sync), not queued as news:
    # a hundred rows written at one instant would be a backlog to gossip, not idle.
    rows = []
    for name in names[:writers]:
        change = net.replicas[name].write("workers", name, worker_doc(name, 0), shared=False)
        if change is not None and change.new is not None:
            rows.append(change.new)
    floors = {r.owner: net.replicas[r.owner].floor for r in rows}
    for name in names:
        net.replicas[name].apply([r for r in rows if r.owner != name], floors=floors)
    return net, names, watch


def worker_doc(name: str, generation: int) -> dict[str, object]:
    """About the size of what a worker publishes (docs/registry.md: ~600 bytes)."""
    return {"name": name, "region": "sim", "url": f"http://{name}.internal:4280",
            "cordoned": False, "driver": "process", "generation": generation,
            "total": {"cpus": 64, "memory_mb": 262144, "disk_mb": 2_000_000},
            "used": {"cpus": 8 + generation % 8, "memory_mb": 16384, "disk_mb": 40_000},
            "free": {"cpus": 56, "memory_mb": 245760, "disk_mb": 1_960_000},
            "reservations": generation % 5, "machines": 12, "updated_at": "2026-11-23T12:00:00Z"}


def run_size(n: int, seed: int, writers: int, changes: int, loss_seconds: float) -> None:
    wall = time.monotonic()
    net, names, watch = warm_cluster(n, seed, writers)
    rng = random.Random(seed)
    net.net.run_for(5.0)  # first probes, pulls and push-pulls
    idle, cpu = measure(net, 10.0, n)

    # Busy: a change every 0.5 s from a random writer; each tracked until all have it.
    start_bytes = net.net.traffic.bytes, net.net.traffic.sent
    start_sync = net.stats.sync_bytes, net.stats.sync_messages
    busy_start = net.now
    for i in range(changes):
        writer = names[rng.randrange(min(writers, n))]
        net.write(writer, "workers", writer, worker_doc(writer, i + 1))
        version = net.replicas[writer].counter
        watch.tracked[(writer, version)] = (net.now, {writer})
        net.net.run_for(0.5)
    busy_seconds = net.now - busy_start
    busy = Traffic((net.net.traffic.bytes - start_bytes[0]) / n / busy_seconds,
                   (net.net.traffic.sent - start_bytes[1]) / n / busy_seconds,
                   (net.stats.sync_bytes - start_sync[0]) / n / busy_seconds,
                   (net.stats.sync_messages - start_sync[1]) / n / busy_seconds)
    net.net.run_until(lambda: len(watch.reached) == len(watch.tracked), timeout=30.0)
    took = [watch.reached.get(k, math.inf) for k in watch.tracked]

    # Detection: kill a node that writes nothing.
    victim = names[-1]
    net.kill(victim)
    watch.live.discard(victim)
    killed_at = net.now
    dead_seen: dict[str, float] = {}

    def all_dead() -> bool:
        for o in watch.events:
            if o.event.kind is EventKind.DEAD and o.event.member.name == victim:
                dead_seen.setdefault(o.observer, o.at - killed_at)
        watch.events.clear()
        return watch.live <= dead_seen.keys()

    net.net.run_until(all_dead, timeout=120.0, step=0.25)
    detection = max(dead_seen.values()) if watch.live <= dead_seen.keys() else math.inf

    # 5% loss: suspicions and false deaths of live nodes.
    watch.events.clear()
    raised_before = sum(net.net.nodes[n].swim.stats.suspicions for n in watch.live)
    net.net.loss = 0.05
    net.net.run_for(loss_seconds)
    net.net.loss = 0.0
    suspected = {o.event.member.name for o in watch.events
                 if o.event.kind is EventKind.SUSPECT and o.event.member.name != victim}
    false_deaths = {o.event.member.name for o in watch.events
                    if o.event.kind is EventKind.DEAD and o.event.member.name != victim}
    raised = sum(net.net.nodes[n].swim.stats.suspicions for n in watch.live) - raised_before

    rounds = epidemic_rounds(n, LAN.gossip_nodes)
    spread_bound = rounds * LAN.gossip_interval
    first_probe = LAN.probe_interval * math.e / (math.e - 1)
    s_min, s_max = suspicion_min(LAN, n), suspicion_max(LAN, n)
    detect_theory = first_probe + s_min + spread_bound
    live = n - 1
    probes = live * loss_seconds / LAN.probe_interval
    p_fail = (1 - 0.95 ** 2) * (1 - 0.95 ** 4) ** LAN.indirect_checks
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    ok_spread = pct(took, .99) <= spread_bound
    ok_detect = detection <= detect_theory
    print(f"\n## {n} nodes ({min(writers, n)} of them own a row; seed {seed}; "
          f"simulated in {time.monotonic() - wall:.0f} s, peak RSS {rss:.0f} MB)")
    print(f"change reaches all     p50 {pct(took, .5) * 1000:5.0f} ms  "
          f"p99 {pct(took, .99) * 1000:5.0f} ms  ({len(took)} changes; epidemic estimate "
          f"{rounds:.1f} rounds x {LAN.gossip_interval * 1000:.0f} ms = "
          f"{spread_bound * 1000:.0f} ms: {'within' if ok_spread else 'OVER'})")
    print(f"dead node seen by all  {detection:5.1f} s  (first probe {first_probe:.1f} s + "
          f"Min suspicion {s_min:.1f} s + spread {spread_bound:.1f} s = {detect_theory:.1f} s: "
          f"{'within' if ok_detect else 'OVER'}; Max suspicion alone {s_max:.1f} s)")
    print(f"5% loss, {loss_seconds:.0f} s        suspicions {raised} (of {len(suspected)} "
          f"live nodes), false deaths {len(false_deaths)}  (SWIM expects "
          f"{probes * p_fail:.1f} suspicions in {probes:.0f} probes; aim 0 false deaths)")
    for label, t in (("idle", idle), ("busy", busy)):
        print(f"{label} per node per s    gossip {t.bytes:6.0f} B in {t.messages:5.2f} packets, "
              f"sync {t.sync_bytes:6.0f} B in {t.sync_messages:4.2f} messages  "
              f"(theory: flat in N)")
    print(f"CPU per node per simulated s  {cpu * 1000:.2f} ms  (theory: flat in N)")
    gc.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,1000,5000")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--writers", type=int, default=100,
                        help="nodes that own a row (origins)")
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--loss-seconds", type=float, default=30.0)
    parser.add_argument("--rows", action="store_true",
                        help="the rows section: a view of many workers and machines")
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--machines", type=int, default=100_000)
    parser.add_argument("--agents", action="store_true",
                        help="one registry agent per host under a stream of creates")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--creates", type=float, default=1000.0,
                        help="creates per second across the fleet")
    parser.add_argument("--writers-per-host", type=int, default=1,
                        help="processes per host writing rows through its agent (origins)")
    parser.add_argument("--warmup", type=float, default=2.0,
                        help="seconds of creates before the measured window")
    parser.add_argument("--measure", type=float, default=3.0,
                        help="seconds of creates measured")
    defaults = AgentLoad()
    parser.add_argument("--eager-peers", type=int, default=defaults.eager_peers)
    parser.add_argument("--sync-interval", type=float, default=defaults.sync_interval)
    parser.add_argument("--no-push-on", dest="push_on", action="store_false",
                        help="agents push only the rows written on their host, not every row "
                             "new to them (the spread before pushing on, to compare)")
    parser.add_argument("--gossip-nodes", type=int, default=LAN.gossip_nodes)
    parser.add_argument("--gossip-interval", type=float, default=LAN.gossip_interval)
    args = parser.parse_args()
    if args.rows:
        from bench.registry.rows import rows_main  # only this section needs it
        rows_main(args.workers, args.machines, args.seed)
        return
    if args.agents:
        from bench.registry.agents import agents_main
        agents_main(AgentLoad(
            hosts=args.hosts, creates_per_second=args.creates,
            writers_per_host=args.writers_per_host, warmup=args.warmup, measure=args.measure,
            seed=args.seed, eager_peers=args.eager_peers, sync_interval=args.sync_interval,
            push_on=args.push_on,
            swim=replace(LAN, gossip_nodes=args.gossip_nodes,
                         gossip_interval=args.gossip_interval)))
        return
    print(f"memberlist LAN defaults: probe {LAN.probe_interval:g} s, gossip every "
          f"{LAN.gossip_interval:g} s to {LAN.gossip_nodes}; sync every {SYNC_INTERVAL:g} s; "
          f"{EAGER_PEERS} eager pushes")
    for n in (int(s) for s in args.sizes.split(",")):
        run_size(n, args.seed, args.writers, args.changes, args.loss_seconds)


if __name__ == "__main__":
    main()
