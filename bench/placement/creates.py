"""Placement throughput through the broker's public API, against a trivial endpoint as the ceiling.

First line (the default): a real ``bodega up`` (``bench/rigs/placement_up.py``): one region of
``--workers-per-region`` null-driver workers, each its own process, with the registry,
the proxy and the image registry running beside them. Second line (``--rig``): the
rig, ``--hosts`` processes holding ``--workers`` null-driver workers (no gossip, no
proxy) and a broker that knows them from a static catalog. On each, the same load
generator and concurrency measure ``GET /v1/health`` on the broker (the ceiling of
this server stack on this machine) and ``POST .../machines`` (each ranked over every
worker, reserved and created on the winner). Prints creates/s, p50 and p99, the
ratio to the ceiling, the CPU each side spent per create (and all of them
together), the ``uptime`` load beside each run, and the time to rank 1,000
workers (in this process, same code). With ``--idle``, the cores each role of
``bodega up`` used and its memory (PSS) at the end of that idle window.

    python -m bench.placement.creates [--workers-per-region 20] [--creates 4000] [--concurrency 32]
                              [--profile DIR] [--idle SECONDS] [--up-arg=FLAG ...]
                              [--keep DIR] [--rig [--workers 1000] [--hosts 2]
                              [--fsync] [--policy utility] [--sample 0]] [--no-up]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.rigs.loadgen import Result, body, run
from bench.rigs.placement_up import Measured, load, on_up, print_problems
from bench.rigs.start_stages import cpu_seconds
from bodega.model.capacity import Ask, Totals, Usage
from bodega.placement import Candidate, CandidateTable, PlacementRequest, Policy, rank_region

TOKEN = "bench-token"
HERE = Path(__file__).resolve().parent


def spawn(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1])}
    fleet = HERE.parent / "rigs" / "fleet.py"
    return subprocess.Popen([sys.executable, str(fleet), *args], env=env)


async def ready(path: Path, process: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():  # noqa: ASYNC240 (a small local file, polled)
        if process.poll() is not None:
            raise SystemExit(f"{process.args!r} exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} did not appear in {timeout:.0f}s")
        await asyncio.sleep(0.1)


def rank_time(n: int = 1000, rounds: int = 500) -> tuple[float, float]:
    """Median seconds to filter and rank ``n`` workers, full ranking and power of two."""
    rng = random.Random(1)
    table = CandidateTable("ams", [
        Candidate(f"w{i}", "ams", "http://w", Totals(cpus=8, memory_mb=32768, disk_gb=100),
                  Usage(millicpus=rng.randint(0, 7000), memory_mb=rng.randint(0, 30000)))
        for i in range(n)])
    request = PlacementRequest("bench", Ask(cpus=1, memory_mb=256), ("ams",),
                               colocated={"w1": 3, "w7": 1})
    out = []
    for policy in (Policy(), Policy(sample=2)):
        times = []
        for _ in range(rounds):
            began = time.perf_counter()
            next(rank_region(request, table, policy).attempts())
            times.append(time.perf_counter() - began)
        out.append(statistics.median(times))
    return out[0], out[1]


def report(name: str, result: Result) -> None:
    codes = ", ".join(f"{k}: {v}" for k, v in sorted(result.statuses.items()))
    print(f"  {name:<28} {result.rate:8.0f}/s   p50 {result.median() * 1000:6.2f} ms   "
          f"p99 {result.percentile(99) * 1000:6.2f} ms   ({codes})")
    for error in result.errors:
        print(f"    e.g. {error.decode(errors='replace')}")


async def on_rig(args: argparse.Namespace) -> Measured:
    """The rig: null workers in ``--hosts`` processes and a broker with a static catalog."""
    with tempfile.TemporaryDirectory(prefix="bodega-bench-") as tmp:
        base = Path(tmp)
        per_host = -(-args.workers // args.hosts)
        hosts, files = [], []
        for h in range(args.hosts):
            count = min(per_host, args.workers - h * per_host)
            out = base / f"hosts-{h}.json"
            hosts.append(spawn("workers", "--count", str(count), "--prefix", "w",
                               "--offset", str(h), "--stride", str(args.hosts),
                               "--cpus", str(args.cpus), "--memory-mb", str(args.memory_mb),
                               "--out", str(out), *(["--fsync"] if args.fsync else [])))
            files.append(out)
        processes = list(hosts)
        try:
            for out, process in zip(files, hosts, strict=True):
                await ready(out, process)
            broker_file = base / "broker.json"
            broker = spawn("broker", "--workers", ",".join(map(str, files)), "--token", TOKEN,
                           "--out", str(broker_file), "--policy", args.policy,
                           "--sample", str(args.sample))
            processes.append(broker)
            await ready(broker_file, broker)
            url = json.loads(broker_file.read_text())["url"]
            auth = {"Authorization": f"Bearer {TOKEN}"}
            app = body({"app_name": "bench", "org_slug": "personal"})
            await run(url, lambda n: ("POST", "/v1/apps", app),
                      total=1, concurrency=1, headers=auth)
            create = body({"config": {"image": "bench:1", "guest": {
                "cpu_kind": "shared", "cpus": 1, "memory_mb": 256}}, "skip_launch": True})

            def make_create(n: int) -> tuple[str, str, bytes]:
                return "POST", "/v1/apps/bench/machines", create

            # Warm both paths, then measure the ceiling and the creates with the same generator.
            await run(url, lambda n: ("GET", "/v1/health", b""), total=500,
                      concurrency=args.concurrency, headers=auth)
            await run(url, make_create, total=200, concurrency=args.concurrency, headers=auth)
            ceiling = await run(url, lambda n: ("GET", "/v1/health", b""), total=args.creates,
                                concurrency=args.concurrency, headers=auth)
            first = load()
            before = [cpu_seconds(p.pid) for p in (broker, *hosts)]
            own = time.process_time()
            creates = await run(url, make_create, total=args.creates,
                                concurrency=args.concurrency, headers=auth)
            generator = time.process_time() - own
            used = [cpu_seconds(p.pid) - b for p, b in zip((broker, *hosts), before, strict=True)]
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
    return Measured(ceiling, creates, {"broker": used[0], "worker": sum(used[1:])},
                    generator, (first, load()))


def print_measured(title: str, measured: Measured, keep: Path | None = None) -> None:
    print(f"{title}; load average {measured.loads[0]} at the creates' start, "
          f"{measured.loads[1]} at their end")
    report("trivial endpoint (ceiling)", measured.ceiling)
    report("create machine", measured.creates)
    creates = measured.creates
    print(f"  placed {creates.ok()} machines; creates/s is "
          f"{creates.rate / measured.ceiling.rate:.2f}x the ceiling's requests/s")
    per = 1000 / max(1, creates.count)
    print(f"  CPU per create: {by_role(measured.cpu, per, '{:.2f} ms')}, load generator "
          f"{measured.generator * per:.2f} ms (on {os.cpu_count()} cores)")
    if measured.rest is not None:
        print(f"  idle before the creates (load average {measured.idle_load} at its end): "
              f"cores used: {by_role(measured.rest.cores, 1, '{:.3f}')}")
        print(f"  memory at the idle's end, PSS: {by_role(measured.rest.pss_mib, 1, '{:.0f} MiB')}")
    print_problems(measured.problems, keep)


def by_role(figures: dict[str, float], scale: float, form: str) -> str:
    """Each role's figure, then their sum over the whole cluster."""
    parts = [f"{role} {form.format(value * scale)}"
             for role, value in sorted(figures.items(), key=order)]
    return ", ".join(parts) + f"; all {form.format(sum(figures.values()) * scale)}"


def order(item: tuple[str, float]) -> tuple[int, str]:
    """Broker first, then workers, then the rest of the cluster by name."""
    return ({"broker": 0, "worker": 1}.get(item[0], 2), item[0])


async def main(args: argparse.Namespace) -> None:
    if not args.no_up:
        up_args = tuple(args.up_arg)
        measured = await on_up(args.workers_per_region, args.creates, args.concurrency,
                               args.cpus, args.memory_mb, args.profile, args.idle, up_args,
                               args.keep)
        print_measured(f"placement on bodega up{' ' + ' '.join(up_args) if up_args else ''}: "
                       f"{args.workers_per_region} null-driver workers (each a process), "
                       f"{args.concurrency} concurrent clients, {args.creates} requests each",
                       measured, args.keep)
    if args.rig:
        measured = await on_rig(args)
        print_measured(f"placement on the rig: {args.workers} null workers in {args.hosts} "
                       f"processes{' (commits fsynced)' if args.fsync else ''}, one broker "
                       f"({args.policy}{f', p{args.sample}c' if args.sample else ''}), "
                       f"{args.concurrency} concurrent clients, {args.creates} requests each",
                       measured)
    full, p2c = rank_time()
    print(f"rank 1,000 workers: {full * 1e3:.3f} ms full ranking, "
          f"{p2c * 1e3:.3f} ms power of two choices (median of 500)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers-per-region", type=int, default=20,
                        help="bodega up's workers, each its own process (a /24 of addresses, "
                        "so at most about 250 machines each)")
    parser.add_argument("--creates", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--profile", type=Path,
                        help="py-spy bodega up's broker and one worker for 12 s of the creates "
                        "into DIR (raw collapsed stacks)")
    parser.add_argument("--idle", type=float, default=0.0, metavar="SECONDS",
                        help="first measure the CPU bodega up uses doing nothing for SECONDS")
    parser.add_argument("--up-arg", action="append", default=[], metavar="FLAG",
                        help="a flag for bodega up, e.g. --up-arg=--registry-agent (repeatable)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="copy bodega up's logs into DIR before its data dir is removed")
    parser.add_argument("--no-up", action="store_true", help="skip the bodega up line")
    parser.add_argument("--rig", action="store_true",
                        help="also run the rig (--workers null workers in --hosts processes)")
    parser.add_argument("--workers", type=int, default=1000, help="the rig's workers")
    parser.add_argument("--hosts", type=int, default=2, help="the rig's worker processes")
    parser.add_argument("--policy", default="utility", help="the rig broker's policy")
    parser.add_argument("--sample", type=int, default=0, help="the rig broker's sample")
    parser.add_argument("--cpus", type=int, default=64, help="each worker's cpus")
    parser.add_argument("--memory-mb", type=int, default=65536, help="each worker's memory")
    parser.add_argument("--fsync", action="store_true",
                        help="the rig's null workers commit durably (full fsync), as real "
                        "workers (and bodega up's) do")
    asyncio.run(main(parser.parse_args()))
