"""The registry on real UDP and HTTP on loopback: spread, detection, false positives, bytes.

N registry nodes (each with its own HTTP server for sync), several per
process across a few processes, all on memberlist's LAN defaults. Prints
each figure beside what theory expects:

- time for one change to reach every node (p50, p99 over several changes),
  against the epidemic estimate: log_{f+1}(N) + ln(N)/f rounds of push gossip
  with fan-out f, times the gossip interval;
- time for every node to declare a killed node dead, against SWIM's
  expectation: the first probe of it (e/(e-1) protocol periods on average)
  plus the suspicion timeout (Min once enough members confirm; Max alone);
- suspicions and false deaths of live nodes during a run where every
  process drops 5% of the packets it sends (seeded, so runs repeat);
- gossip and sync bytes per node per second, idle and while changing.

With ``--seal-compare`` it prices sealed gossip instead: the same N nodes
run with each packet protection in turn (``bench/registry/envelopes.py``: none, the
HMAC tag bodega used before, and the AES-GCM sealing it runs now), each
node rewriting its row every ``--write-interval`` seconds, and the CPU the
node processes use per node per second is measured over ``--cpu-seconds``;
the modes alternate over ``--rounds`` rounds, and the ratios are printed.

    python -m bench.registry.gossip [--nodes 50] [--procs 5] [--changes 20] [--loss-seconds 60]
    python -m bench.registry.gossip --seal-compare [--nodes 50] [--rounds 2] [--cpu-seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from tests.keyring_kit import KEYRING

from bench.registry.envelopes import MODES, TimedEnvelope, envelope, per_packet_us
from bodega.registry import EventKind, RegistryConfig, RegistryNode, Status, SwimConfig
from bodega.registry.membership.core.members import Addr
from bodega.registry.membership.core.suspicion import suspicion_max, suspicion_min
from bodega.registry.membership.transport import Receiver, UdpTransport
from bodega.runtime.serve import Served, bind, serve

ROOT = Path(__file__).resolve().parents[2]  # children run as `python -m bench.registry.gossip` here
LAN = SwimConfig()


# ── a child process: K nodes ─────────────────────────────────────────────────

class LossyUdp:
    """A UDP endpoint that drops a share of what it sends, from a seeded generator."""

    def __init__(self, inner: UdpTransport, rng: random.Random, loss: list[float]) -> None:
        self.inner = inner
        self.rng = rng
        self.loss = loss  # shared, so the parent can turn loss on and off

    @property
    def local_addr(self) -> Addr:
        return self.inner.local_addr

    def send(self, data: bytes, addr: Addr) -> bool:
        if self.loss[0] and self.rng.random() < self.loss[0]:
            return True  # lost on the way, as far as the sender can tell
        return self.inner.send(data, addr)

    def close(self) -> None:
        self.inner.close()


class Child:
    def __init__(self, root: Path, seed: int, mode: str) -> None:
        self.root = root
        self.seed = seed
        self.mode = mode
        self.loss = [0.0]
        self.nodes: dict[str, tuple[RegistryNode, Served]] = {}
        self.envelopes: list[TimedEnvelope] = []
        self.arrivals: dict[str, dict[str, float]] = {}  # tag -> node -> when
        self.events: list[tuple[float, str, str, str]] = []  # when, observer, kind, about
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, names: list[str], seeds: list[str]) -> dict[str, str]:
        out = {}
        for name in names:
            rng = random.Random(f"{self.seed}-{name}")

            async def binder(host: str, port: int, receiver: Receiver,
                             rng: random.Random = rng) -> LossyUdp:
                return LossyUdp(await UdpTransport.bind(host, port, receiver), rng, self.loss)

            sock = bind("127.0.0.1", 0)
            url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            timed = TimedEnvelope(envelope(self.mode, KEYRING, name))
            self.envelopes.append(timed)
            node = RegistryNode(RegistryConfig(
                name=name, role="worker", region="bench", data_dir=self.root / name,
                keyring=KEYRING, seeds=tuple(seeds), meta={"url": url}),
                registry=CollectorRegistry(), bind=binder, rng=random.Random(rng.random()),
                envelope=timed)
            served = await serve(Starlette(routes=node.routes()), "127.0.0.1", 0, sock=sock)
            await node.start()
            self.nodes[name] = (node, served)
            self._tasks.append(asyncio.create_task(self._watch_rows(name, node)))
            self._tasks.append(asyncio.create_task(self._watch_members(name, node)))
            host, port = node.gossip_addr
            out[name] = f"{host}:{port}"
        return out

    async def _watch_rows(self, name: str, node: RegistryNode) -> None:
        with node.subscribe("workers") as sub:
            async for change in sub:
                if change.doc is not None and "tag" in change.doc:
                    self.arrivals.setdefault(change.doc["tag"], {}).setdefault(
                        name, time.monotonic())

    async def _watch_members(self, name: str, node: RegistryNode) -> None:
        with node.membership.events() as feed:
            async for event in feed:
                self.events.append((time.monotonic(), name, str(event.kind),
                                    event.member.name))

    def handle(self, cmd: dict[str, Any]) -> Any:
        kind = cmd["cmd"]
        if kind == "status":
            return {n: sum(1 for m in node.membership.members() if m.status is Status.ALIVE)
                    for n, (node, _) in self.nodes.items()}
        if kind == "write":
            node = self.nodes[cmd["node"]][0]
            now = time.monotonic()
            node.put_owned("workers", cmd["node"], {
                "name": cmd["node"], "region": "bench", "url": "http://x", "cordoned": False,
                "tag": cmd["tag"], "pad": "x" * 300})  # about a real workers row's size
            return now
        if kind == "arrivals":
            return self.arrivals.get(cmd["tag"], {})
        if kind == "loss":
            self.loss[0] = cmd["value"]
            return True
        if kind == "writing":
            self._tasks.append(asyncio.create_task(self._write_every(cmd["interval"])))
            return True
        if kind == "cpu":
            packets = dropped = 0.0
            for node, _ in self.nodes.values():
                reg = node.metrics.registry
                packets += sum(reg.get_sample_value("bodega_gossip_packets_total",
                                                    {"direction": d}) or 0 for d in ("in", "out"))
                dropped += sum(reg.get_sample_value("bodega_gossip_bad_packets_total",
                                                    {"reason": r}) or 0
                               for r in ("auth", "unknown_key", "replay", "decode"))
            return {"cpu": time.process_time(), "packets": packets, "dropped": dropped,
                    "envelope": sum(e.cpu_ns for e in self.envelopes) / 1e9}
        if kind == "events":
            return [e for e in self.events if e[0] >= cmd["since"]]
        if kind == "bytes":
            totals = {"gossip_out": 0.0, "gossip_in": 0.0, "sync_out": 0.0, "sync_in": 0.0,
                      "suspicions": 0.0}
            for node, _ in self.nodes.values():
                reg = node.metrics.registry
                totals["suspicions"] += reg.get_sample_value("bodega_swim_suspicions_total") or 0
                for direction in ("out", "in"):
                    totals[f"gossip_{direction}"] += reg.get_sample_value(
                        "bodega_gossip_bytes_total", {"direction": direction}) or 0.0
                    totals[f"sync_{direction}"] += reg.get_sample_value(
                        "bodega_registry_sync_bytes_total", {"direction": direction}) or 0.0
            return totals
        raise ValueError(f"unknown command {kind}")

    async def _write_every(self, interval: float) -> None:
        """Every node of this process rewrites its row every ``interval`` (jittered)."""
        rng = random.Random(self.seed)
        count = 0
        while True:
            await asyncio.sleep(interval / max(1, len(self.nodes)) * rng.uniform(0.5, 1.5))
            name = rng.choice(list(self.nodes))
            count += 1
            self.nodes[name][0].put_owned("workers", name, {
                "name": name, "region": "bench", "url": "http://x", "cordoned": False,
                "tag": f"steady-{count}", "pad": "x" * 300})

    async def kill(self, name: str) -> float:
        node, served = self.nodes.pop(name)
        now = time.monotonic()
        await node.stop(leave=False)
        await served.stop(grace=0.5)
        return now

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for _, served in self.nodes.values():  # no pull is served from a closed view
            await served.stop(grace=0.5)
        for node, _ in self.nodes.values():
            await node.stop(leave=False)


async def child_main(seed: int, mode: str) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    with tempfile.TemporaryDirectory(prefix="bodega-bench-") as tmp:
        child = Child(Path(tmp), seed, mode)
        while line := await reader.readline():
            cmd = json.loads(line)
            if cmd["cmd"] == "start":
                result: Any = await child.start(cmd["names"], cmd["seeds"])
            elif cmd["cmd"] == "kill":
                result = await child.kill(cmd["node"])
            elif cmd["cmd"] == "stop":
                await child.stop()
                print(json.dumps(True), flush=True)
                return
            else:
                result = child.handle(cmd)
            print(json.dumps(result), flush=True)


# ── the parent: drives children, measures, prints ────────────────────────────

class Proc:
    def __init__(self, process: asyncio.subprocess.Process, names: list[str]) -> None:
        self.process = process
        self.names = names

    async def ask(self, **cmd: Any) -> Any:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(cmd).encode() + b"\n")
        await self.process.stdin.drain()
        line = await self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"bench child for {self.names[0]}.. exited")
        return json.loads(line)


async def ask_all(procs: list[Proc], **cmd: Any) -> list[Any]:
    return list(await asyncio.gather(*(p.ask(**cmd) for p in procs)))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def epidemic_rounds(n: int, fanout: int) -> float:
    return math.log(n, fanout + 1) + math.log(n) / fanout


async def wait_converged(procs: list[Proc], n: int, timeout: float = 120.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        counts = [c for status in await ask_all(procs, cmd="status") for c in status.values()]
        if counts and all(c == n for c in counts):
            return time.monotonic() - start
        await asyncio.sleep(0.5)
    raise RuntimeError("membership did not converge")


async def spread(procs: list[Proc], owner_of: dict[str, Proc], names: list[str],
                 changes: int, rng: random.Random, tag: str) -> list[float]:
    """Seconds from each write until the last node applied it."""
    took = []
    for i in range(changes):
        writer = rng.choice(names)
        label = f"{tag}-{i}"
        written = await owner_of[writer].ask(cmd="write", node=writer, tag=label)
        deadline = time.monotonic() + 15
        while True:
            await asyncio.sleep(0.05)
            arrivals: dict[str, float] = {}
            for part in await ask_all(procs, cmd="arrivals", tag=label):
                arrivals.update(part)
            if len(arrivals) == len(names):
                took.append(max(arrivals.values()) - written)
                break
            if time.monotonic() > deadline:
                took.append(math.inf)
                break
        await asyncio.sleep(rng.uniform(0.3, 0.7))  # writes do not line up with gossip ticks
    return took


async def traffic(procs: list[Proc], n: int, seconds: float) -> dict[str, float]:
    before = await ask_all(procs, cmd="bytes")
    await asyncio.sleep(seconds)
    after = await ask_all(procs, cmd="bytes")
    return {k: (sum(a[k] for a in after) - sum(b[k] for b in before)) / n / seconds
            for k in before[0]}


async def start_cluster(args: argparse.Namespace, mode: str = "sealed") -> list[Proc]:
    """N nodes in ``--procs`` child processes, started and joined through the first."""
    n, per = args.nodes, math.ceil(args.nodes / args.procs)
    names = [f"n{i:03d}" for i in range(n)]
    groups = [names[i:i + per] for i in range(0, n, per)]
    procs = []
    for index, group in enumerate(groups):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.registry.gossip", "--child",
            "--seed", str(args.seed + index), "--envelope", mode,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT)
        procs.append(Proc(process, group))
    first = await procs[0].ask(cmd="start", names=names[:1], seeds=[])
    seed_addr = first[names[0]]
    await procs[0].ask(cmd="start", names=procs[0].names[1:], seeds=[seed_addr])
    await asyncio.gather(*(p.ask(cmd="start", names=p.names, seeds=[seed_addr])
                           for p in procs[1:]))
    return procs


async def stop_cluster(procs: list[Proc]) -> None:
    for proc in procs:
        try:
            await asyncio.wait_for(proc.ask(cmd="stop"), 20)
        except (RuntimeError, TimeoutError, BrokenPipeError, ConnectionResetError):
            proc.process.kill()
        await proc.process.wait()


async def main(args: argparse.Namespace) -> None:
    n = args.nodes
    names = [f"n{i:03d}" for i in range(n)]
    rng = random.Random(args.seed)
    procs = await start_cluster(args)
    owner_of = {name: p for p in procs for name in p.names}
    try:
        joined = await wait_converged(procs, n)
        print(f"{n} nodes in {len(procs)} processes on loopback; memberlist LAN defaults "
              f"(probe {LAN.probe_interval:g} s, gossip every {LAN.gossip_interval:g} s to "
              f"{LAN.gossip_nodes}); membership converged in {joined:.1f} s\n")

        await asyncio.sleep(5)  # let the join's push-pulls and first syncs settle
        idle = await traffic(procs, n, 10)
        took = await spread(procs, owner_of, names, args.changes, rng, "clean")
        rounds = epidemic_rounds(n, LAN.gossip_nodes)
        bound = rounds * LAN.gossip_interval
        print(f"change reaches all {n} nodes ({len(took)} changes):\n"
              f"                               p50 {pct(took, .5) * 1000:6.0f} ms   "
              f"p99 {pct(took, .99) * 1000:6.0f} ms   max {max(took) * 1000:6.0f} ms   "
              f"(epidemic estimate {rounds:.1f} rounds x {LAN.gossip_interval * 1000:.0f} ms "
              f"= {bound * 1000:.0f} ms; aim p99 < 1000 ms)")

        victim = names[-1]
        since = time.monotonic()
        killed = await owner_of[victim].ask(cmd="kill", node=victim)
        owner_of[victim].names.remove(victim)
        live = [x for x in names if x != victim]
        detected: dict[str, float] = {}
        deadline = time.monotonic() + 90
        while len(detected) < len(live) and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            for part in await ask_all(procs, cmd="events", since=since):
                for when, observer, kind, about in part:
                    if about == victim and kind == EventKind.DEAD and observer not in detected:
                        detected[observer] = when - killed
        first_probe = LAN.probe_interval * math.e / (math.e - 1)
        s_min, s_max = suspicion_min(LAN, n), suspicion_max(LAN, n)
        print(f"killed node declared dead:     first {min(detected.values()):5.1f} s   "
              f"all {max(detected.values()):5.1f} s   ({len(detected)}/{len(live)} nodes; "
              f"expected first probe {first_probe:.1f} s + suspicion {s_min:.1f} s "
              f"with confirmations, {s_max:.1f} s without = {first_probe + s_min:.1f}.."
              f"{first_probe + s_max:.1f} s)")

        await ask_all(procs, cmd="loss", value=args.loss)
        since = time.monotonic()
        raised_before = sum(b["suspicions"] for b in await ask_all(procs, cmd="bytes"))
        n_live = len(live)
        lossy = await traffic(procs, n_live, args.loss_seconds / 2)
        took_lossy = await spread(procs, owner_of, live, args.changes, rng, "lossy")
        rest = args.loss_seconds / 2 - sum(t for t in took_lossy if t != math.inf)
        if rest > 0:
            await asyncio.sleep(rest)
        events = [e for part in await ask_all(procs, cmd="events", since=since) for e in part]
        raised = sum(b["suspicions"] for b in await ask_all(procs, cmd="bytes")) - raised_before
        suspected = {about for _, _, kind, about in events
                     if kind == EventKind.SUSPECT and about != victim}
        false_deaths = {about for _, _, kind, about in events
                        if kind == EventKind.DEAD and about != victim}
        probes = n_live * args.loss_seconds / LAN.probe_interval
        # SWIM: a probe fails only if the ping or ack and all k indirect paths (4 packets
        # each) are lost: (1-(1-p)^2) * (1-(1-p)^4)^k
        p_fail = (1 - (1 - args.loss) ** 2) * (1 - (1 - args.loss) ** 4) ** LAN.indirect_checks
        print(f"{args.loss:.0%} packet loss, {args.loss_seconds:.0f} s:   suspicions raised "
              f"{raised:.0f} (about {len(suspected)} live nodes)   false deaths "
              f"{len(false_deaths)}   (SWIM expects {probes * p_fail:.1f} suspicions in "
              f"{probes:.0f} probes; aim 0 false deaths)")
        print(f"change under {args.loss:.0%} loss ({len(took_lossy)} changes): "
              f"p50 {pct(took_lossy, .5) * 1000:.0f} ms   p99 {pct(took_lossy, .99) * 1000:.0f} ms")
        print(f"bytes per node per second:     idle gossip out {idle['gossip_out']:,.0f} "
              f"in {idle['gossip_in']:,.0f}, sync out {idle['sync_out']:,.0f} in "
              f"{idle['sync_in']:,.0f}; under loss gossip out {lossy['gossip_out']:,.0f}, "
              f"sync in {lossy['sync_in']:,.0f}")
        print(f"\n(median spread {statistics.median(took) / LAN.gossip_interval:.1f} gossip "
              f"intervals; retransmit limit {LAN.retransmit_limit(n)} per update)")
    finally:
        await stop_cluster(procs)


@dataclass(frozen=True)
class Usage:
    """Per node per second over a measured window."""

    cpu: float  # seconds of CPU of the node processes
    envelope: float  # of which sealing and opening packets (or tagging, or nothing)
    packets: float  # in and out
    dropped: float

    @property
    def per_packet_us(self) -> float:
        return self.envelope / self.packets * 1e6


async def usage(args: argparse.Namespace, mode: str) -> Usage:
    """What N nodes with ``mode`` use per node per second, each rewriting its row steadily."""
    procs = await start_cluster(args, mode)
    try:
        await wait_converged(procs, args.nodes)
        await ask_all(procs, cmd="writing", interval=args.write_interval)
        await asyncio.sleep(5)  # past the join's push-pulls and first syncs
        before = await ask_all(procs, cmd="cpu")
        await asyncio.sleep(args.cpu_seconds)
        after = await ask_all(procs, cmd="cpu")
    finally:
        await stop_cluster(procs)
    per = float(args.nodes * args.cpu_seconds)

    def rate(key: str) -> float:
        return float(sum(a[key] - b[key] for a, b in zip(after, before, strict=True))) / per

    return Usage(rate("cpu"), rate("envelope"), rate("packets"), rate("dropped"))


async def seal_compare(args: argparse.Namespace) -> None:
    print(f"{args.nodes} nodes in {args.procs} processes on loopback UDP, each node rewriting "
          f"its ~450-byte row every {args.write_interval:g} s; CPU of the node processes per "
          f"node per second over {args.cpu_seconds:g} s, {args.rounds} rounds\n")
    for size in (200, 1000):
        costs = "   ".join(f"{m} {per_packet_us(m, KEYRING, size):.1f} us" for m in MODES)
        print(f"seal + open one {size}-byte packet:  {costs}")
    runs: dict[str, list[Usage]] = {m: [] for m in MODES}
    for round_ in range(args.rounds):
        for mode in MODES if round_ % 2 == 0 else tuple(reversed(MODES)):
            got = await usage(args, mode)
            runs[mode].append(got)
            print(f"  round {round_ + 1} {mode:>6}: {got.cpu * 1000:6.2f} ms CPU per node per s, "
                  f"{got.envelope * 1000:.3f} ms of it in the envelope "
                  f"({got.per_packet_us:.1f} us a packet), {got.packets:.1f} packets, "
                  f"{got.dropped:.0f} dropped", flush=True)
    print()
    for mode, done in runs.items():
        cpus = [u.cpu * 1000 for u in done]
        print(f"{mode:>6}: {statistics.median(cpus):.2f} ms CPU per node per s "
              f"({min(cpus):.2f}-{max(cpus):.2f}), envelope "
              f"{statistics.median(u.envelope * 1000 for u in done):.3f} ms, "
              f"{statistics.median(u.per_packet_us for u in done):.1f} us a packet")
    cpu = {m: statistics.median(u.cpu for u in done) for m, done in runs.items()}
    print(f"whole-process medians: sealed / none {cpu['sealed'] / cpu['none']:.3f}x, "
          f"sealed / hmac {cpu['sealed'] / cpu['hmac']:.3f}x (run-to-run spread included)")
    # The same sealed runs, had their packets gone through the other envelope instead: the
    # envelope's own CPU, measured in the run, swapped for the other's per packet.
    per_packet = {m: statistics.median(u.per_packet_us for u in done) / 1e6
                  for m, done in runs.items()}
    for other in ("none", "hmac"):
        ratios = [u.cpu / (u.cpu - u.packets * (per_packet["sealed"] - per_packet[other]))
                  for u in runs["sealed"]]
        print(f"sealed / {other} in the same runs: {statistics.median(ratios):.4f}x "
              f"({min(ratios):.4f}-{max(ratios):.4f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--procs", type=int, default=5)
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--loss", type=float, default=0.05)
    parser.add_argument("--loss-seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seal-compare", action="store_true",
                        help="price sealed gossip: CPU per node with none, hmac and sealed")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cpu-seconds", type=float, default=30.0)
    parser.add_argument("--write-interval", type=float, default=1.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--envelope", choices=MODES, default="sealed", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(child_main(args.seed, args.envelope))
    elif args.seal_compare:
        asyncio.run(seal_compare(args))
    else:
        asyncio.run(main(args))
