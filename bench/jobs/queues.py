"""Batch jobs on bodega against Redis queues: dispatch, makespan, queueing, kill -9, claims.

Three pools with the same slots (``--workers`` x ``--slots``) run the same command per
job, a process each (bench/jobs/marks.py): bodega (a real ``bodega up``, tasks taken by
late binding, each a machine), a plain Redis ``BLPOP`` pool and a reliable Redis
``BLMOVE`` pool with a reaper (bench/jobs/redis_pool.py); with ``--before-src DIR``, a fourth:
bodega from another source tree (``git worktree add DIR <commit>``; ``DIR/src``), so a
change is measured beside what it changed. Every pool is up for the whole run, measured
one at a time:

- dispatch latency at no load: one job at a time, from just before the submit to the
  program's first statement (``--runs``);
- makespan of ``--jobs`` jobs of nothing submitted at once (bodega: one submit of that
  count; Redis: pipelined RPUSHes), and the pool's CPU seconds per 1,000 jobs: the median
  of ``--rounds`` batches, the pools taking turns batch by batch (the same work can take
  twice as long on a shared host from one minute to the next, so a pool measured minutes
  after another would be judged on the host's mood);
- queueing delay, arrival to the program's start, under Poisson arrivals of one-job
  submits at each load of ``--rhos`` (rho = arrival rate x ``--service`` / slots; each job
  sleeps ``--service`` seconds), ``--arrivals`` jobs each;
- kill -9 of a worker mid-run (the worker and the programs it runs, as when its host
  dies; restarted at once): jobs that never finish, and the time from the kill until each
  job it held runs again;
- claim mode (bodega only): ``--claimers`` external workers race for ``--claim-jobs``
  one-task jobs, each polling, claiming the first job listed and polling again after a
  409: claims tried per job claimed (1 + its 409s), without and with the article's
  random wait;
- with ``--phases singles,list`` (not run by default): the article's own shape, each of
  ``--singles`` jobs a job of its own of one task, submitted one after another on
  keep-alive connections (bodega: a ``POST /sched/submit`` each, at the job's home's jobs
  door with a pass from ``POST /sched/pass``, or at the broker with ``--submit-via
  broker`` and in the pool ``via-broker``; Redis: an ``RPUSH`` each),
  the pools taking turns round by round: the makespan from the first submit to the last
  job's end, each submit's round trip and each job's submit-to-start (p50, p99), and the
  pool's CPU per job (bodega: each component's too, ``one_cpu_ms_per_job_<n>_<name>`` in
  the JSON, its user and system time from ``/proc``), and the client's (this process's
  CPU while it submits: on the one-by-one path as much as the pool's); then the same
  jobs sent as one list
  (bodega: one submit of a JSON list; Redis: pipelined ``RPUSH``es).

    python -m bench.jobs.queues [--workers 2 --slots 4 --jobs 2000 --rounds 3 ...] [--json out.json]
    python -m bench.jobs.queues --phases makespan --pools bodega,blmove --before-src DIR/src
    python -m bench.jobs.queues --phases singles,list --pools bodega,via-broker,blmove
    python -m bench.jobs.queues --workers 2 --slots 1 --jobs 6 ... --pools-at-once  # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any, Protocol

import uvloop
from tests.cluster.up_kit import free_port

from bench.jobs.bodega_pool import BodegaPool
from bench.jobs.marks import CpuAccount, done_count, marks, new_batch, quantile
from bench.jobs.redis_pool import TTL, RedisPool

Figures = dict[str, Any]


class Pool(Protocol):
    name: str
    slots: int
    cpu: CpuAccount

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def submit(self, batch: str, count: int, seconds: float) -> float: ...
    async def submit_each(self, batches: list[str], seconds: float) -> float: ...
    async def victim_tasks(self, batch: str) -> tuple[str, set[int]]: ...
    async def kill(self, worker: str, batch: str = "", tasks: set[int] | None = None) -> None: ...


async def until(check: Any, timeout: float, every: float = 0.002) -> bool:
    """Poll ``check()`` until true (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(every)
    return True


async def dispatch(pool: Pool, root: Path, runs: int) -> Figures:
    latencies = []
    for run in range(runs + 2):  # two warm-ups
        batch = new_batch(root, f"lat-{run}")
        began = await pool.submit(batch.name, 1, 0)
        if not await until(lambda b=batch: 0 in marks(b, "d"), 60):
            raise SystemExit(f"{pool.name}: job {batch.name} did not run in 60 s")
        if run >= 2:
            latencies.append(marks(batch, "s")[0] - began)
    return {"dispatch_p50_ms": quantile(latencies, 0.5) * 1000,
            "dispatch_p99_ms": quantile(latencies, 0.99) * 1000}


async def makespan(pool: Pool, root: Path, jobs: int, label: str) -> tuple[float, float]:
    """One batch of ``jobs`` jobs submitted at once: (seconds until the last one ended,
    the pool's CPU seconds per 1,000 jobs)."""
    batch = new_batch(root, f"mk{jobs}-{label}")
    before = pool.cpu.seconds()
    began = await pool.submit(batch.name, jobs, 0)
    if not await until(lambda: done_count(batch) >= jobs, max(600.0, jobs * 0.5), 0.25):
        raise SystemExit(f"{pool.name}: {done_count(batch)} of {jobs} jobs ran")
    used = pool.cpu.seconds() - before
    return max(marks(batch, "d").values()) - began, used / jobs * 1000


async def makespans(pools: dict[str, Pool], roots: dict[str, Path], jobs: int,
                    rounds: int) -> dict[str, Figures]:
    """``rounds`` batches of ``jobs`` per pool, the pools taking turns (the first of each
    round rotates), so that each pool meets the host as it is then, not as it was minutes
    before: on a shared machine the same work can take twice as long from one minute to the
    next. The figures are each pool's medians; every round is kept."""
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in pools}
    names = list(pools)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            seen[name].append(await makespan(pools[name], roots[name], jobs, f"r{r}"))
    return {name: {f"makespan_s_{jobs}": statistics.median(s for s, _ in runs),
                   f"cpu_s_per_1000_{jobs}": statistics.median(c for _, c in runs),
                   f"makespan_rounds_s_{jobs}": [s for s, _ in runs],
                   f"cpu_rounds_s_per_1000_{jobs}": [c for _, c in runs]}
            for name, runs in seen.items()}


async def singles(pool: Pool, root: Path, jobs: int, label: str) -> Figures:
    """``jobs`` one-task jobs, each submitted alone, one after another (the article's shape):
    the makespan, each submit's round trip, each job's submit-to-start, CPU per job."""
    batches = [new_batch(root, f"one{jobs}-{label}-{i}") for i in range(jobs)]
    each = getattr(pool, "process_seconds", None)  # bodega: each component's CPU too
    each_before: dict[str, float] = each() if each is not None else {}
    before = pool.cpu.seconds()
    sent: dict[Path, float] = {}
    trips = []
    client = time.process_time()  # this process: the client, all it does while it submits
    for batch in batches:
        sent[batch] = await pool.submit(batch.name, 1, 0)
        trips.append(time.time() - sent[batch])
    client = time.process_time() - client
    if not await until(lambda: all(0 in marks(b, "d") for b in batches),
                       max(300.0, jobs * 0.5), 0.1):
        raise SystemExit(f"{pool.name}: not every one of {jobs} single jobs ran")
    used = pool.cpu.seconds() - before
    each_after: dict[str, float] = each() if each is not None else {}
    starts = [marks(b, "s")[0] - at for b, at in sent.items()]
    ends = max(marks(b, "d")[0] for b in batches)
    return {f"one_makespan_s_{jobs}": ends - min(sent.values()),
            f"one_submit_p50_ms_{jobs}": quantile(trips, 0.5) * 1000,
            f"one_submit_p99_ms_{jobs}": quantile(trips, 0.99) * 1000,
            f"one_start_p50_ms_{jobs}": quantile(starts, 0.5) * 1000,
            f"one_start_p99_ms_{jobs}": quantile(starts, 0.99) * 1000,
            f"one_cpu_ms_per_job_{jobs}": used / jobs * 1000,
            f"one_client_cpu_ms_per_job_{jobs}": client / jobs * 1000,
            **{f"one_cpu_ms_per_job_{jobs}_{name}": (spent - each_before[name]) / jobs * 1000
               for name, spent in each_after.items() if name in each_before}}


async def in_one_list(pool: Pool, root: Path, jobs: int, label: str) -> Figures:
    """The same one-task jobs sent at once as a list: the makespan and CPU per job."""
    batches = [new_batch(root, f"list{jobs}-{label}-{i}") for i in range(jobs)]
    before = pool.cpu.seconds()
    began = await pool.submit_each([b.name for b in batches], 0)
    if not await until(lambda: all(0 in marks(b, "d") for b in batches),
                       max(300.0, jobs * 0.5), 0.1):
        raise SystemExit(f"{pool.name}: not every one of {jobs} listed jobs ran")
    used = pool.cpu.seconds() - before
    return {f"list_makespan_s_{jobs}": max(marks(b, "d")[0] for b in batches) - began,
            f"list_cpu_ms_per_job_{jobs}": used / jobs * 1000}


async def in_turns(pools: dict[str, Pool], roots: dict[str, Path], rounds: int,
                   run: Any) -> dict[str, Figures]:
    """``run(pool, root, label)`` ``rounds`` times per pool, the pools taking turns as the
    makespans do; each figure the median of its rounds (and, as ``<figure>_rounds``, each round's:
    the host's speed drifts within a run, and a change is judged round by round)."""
    seen: dict[str, list[Figures]] = {name: [] for name in pools}
    names = list(pools)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            seen[name].append(await run(pools[name], roots[name], f"r{r}"))
    return {name: {**{key: statistics.median(f[key] for f in runs) for key in runs[0]},
                   **{f"{key}_rounds": [f[key] for f in runs] for key in runs[0]}}
            for name, runs in seen.items()}


async def queueing(pool: Pool, root: Path, rho: float, arrivals: int,
                   service: float) -> Figures:
    rate = rho * pool.slots / service
    arrived: dict[Path, float] = {}
    submits = []
    clock = time.monotonic()
    for i in range(arrivals):
        clock += random.expovariate(rate)
        await asyncio.sleep(max(0.0, clock - time.monotonic()))
        batch = new_batch(root, f"q{int(rho * 100)}-{i}")
        arrived[batch] = time.time()
        submits.append(asyncio.create_task(pool.submit(batch.name, 1, service)))
    await asyncio.gather(*submits)
    if not await until(lambda: all(0 in marks(b, "d") for b in arrived),
                       arrivals * service + 300, 0.1):
        raise SystemExit(f"{pool.name}: not every job ran at rho {rho}")
    delays = [marks(b, "s")[0] - at for b, at in arrived.items()]
    return {f"delay_p50_ms_rho{rho:g}": quantile(delays, 0.5) * 1000,
            f"delay_p99_ms_rho{rho:g}": quantile(delays, 0.99) * 1000}


async def kill9(pool: Pool, root: Path, seconds: float, lease: float,
                lost_after: float) -> Figures:
    count = 3 * pool.slots
    batch = new_batch(root, f"kill-{pool.name}")  # a name of its own: its programs are found by it
    await pool.submit(batch.name, count, seconds)
    if not await until(lambda: len(marks(batch, "s")) >= pool.slots, 120, 0.05):
        raise SystemExit(f"{pool.name}: the slots never filled")
    held: set[int] = set()
    for _ in range(50):  # the status can lag the marks by a moment
        worker, held = await pool.victim_tasks(batch.name)
        if held:
            break
        await asyncio.sleep(0.1)
    if not held:
        raise SystemExit(f"{pool.name}: no worker ran a task of the batch")
    killed_at = time.time()
    await pool.kill(worker, batch.name, held)
    # Lost means never run: the others first, then a generous while for the held ones.
    await until(lambda: done_count(batch) >= count - len(held), 600, 0.1)
    await until(lambda: done_count(batch) >= count, 2 * lease + lost_after, 0.1)
    started = marks(batch, "s")
    again = [started[t] - killed_at for t in held if started.get(t, 0) > killed_at]
    return {"held_by_killed_worker": len(held), "jobs_lost": count - done_count(batch),
            "rerun_s": max(again) if len(again) == len(held) else math.inf}


async def claims(pool: BodegaPool, jobs: int, claimers: int) -> Figures:
    figures: Figures = {}
    for label, wait in (("no_wait", 0.0), ("random_wait", 0.05)):
        won, conflicts = await pool.claims(jobs, claimers, wait)
        figures[f"claims_tried_per_job_{label}"] = (won + conflicts) / won
    return figures


async def measure(pools: dict[str, Pool], roots: dict[str, Path],
                  args: argparse.Namespace) -> dict[str, Figures]:
    """Every pool is started (side by side: nothing is measured yet), then measured phase
    by phase: one pool after another, but for the makespans, whose rounds alternate between
    the pools (and, with ``--pools-at-once``, the queueing, kill -9 and claim phases, which
    then run for every pool side by side)."""
    figures: dict[str, Figures] = {name: {} for name in pools}
    started: list[Pool] = []

    async def start(pool: Pool) -> None:
        await pool.start()
        started.append(pool)

    try:
        await at_once(start(pool) for pool in pools.values())
        if "dispatch" in args.phases:
            for name, pool in pools.items():
                figures[name] |= await dispatch(pool, roots[name], args.runs)
        if "makespan" in args.phases:
            for jobs in args.jobs:
                for name, found in (await makespans(pools, roots, jobs, args.rounds)).items():
                    figures[name] |= found
        for jobs in args.singles:
            for phase, run in (("singles", singles), ("list", in_one_list)):
                if phase in args.phases:
                    found = await in_turns(pools, roots, args.rounds,
                                           lambda p, r, label, n=jobs, f=run: f(p, r, n, label))
                    for name, more in found.items():
                        figures[name] |= more

        async def alone(name: str, pool: Pool) -> None:
            if "queueing" in args.phases:
                for rho in args.rhos:
                    figures[name] |= await queueing(pool, roots[name], rho, args.arrivals,
                                                    args.service)
            if "kill" in args.phases:
                figures[name] |= await kill9(pool, roots[name], args.kill_seconds, args.lease,
                                             args.lost_after)
            if "claims" in args.phases and isinstance(pool, BodegaPool) and name == "bodega":
                figures[name] |= await claims(pool, args.claim_jobs, args.claimers)

        if args.pools_at_once:
            await at_once(alone(name, pool) for name, pool in pools.items())
        else:
            for name, pool in pools.items():
                await alone(name, pool)
        return figures
    finally:
        await at_once(pool.stop() for pool in started)


async def at_once(steps: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run ``steps`` side by side, each to its end; then raise the first one's error."""
    ends = await asyncio.gather(*steps, return_exceptions=True)
    for end in ends:
        if isinstance(end, BaseException):
            raise end


PHASES = ("dispatch", "makespan", "queueing", "kill", "claims")
MORE_PHASES = ("singles", "list")  # the article's shape: asked for by name
VIA_BROKER = "via-broker"  # bodega again, its one-task jobs submitted to the broker
ORDER = ("before", "bodega", VIA_BROKER, "blmove", "blpop")  # the table's columns


def table(results: dict[str, Figures], args: argparse.Namespace) -> str:
    rows = [("dispatch_p50_ms", "dispatch latency p50 (ms)"),
            ("dispatch_p99_ms", "dispatch latency p99 (ms)")]
    for jobs in args.jobs:
        rows += [(f"makespan_s_{jobs}", f"makespan of {jobs:,} jobs (s)"),
                 (f"cpu_s_per_1000_{jobs}", f"CPU s per 1,000 jobs (of {jobs:,})")]
    for rho in args.rhos:
        rows += [(f"delay_p50_ms_rho{rho:g}", f"queueing delay p50, rho {rho:g} (ms)"),
                 (f"delay_p99_ms_rho{rho:g}", f"queueing delay p99, rho {rho:g} (ms)")]
    for jobs in args.singles if set(MORE_PHASES) & set(args.phases) else []:
        rows += [(f"one_makespan_s_{jobs}", f"{jobs:,} single submits: makespan (s)"),
                 (f"one_submit_p50_ms_{jobs}", "  a submit's round trip p50 (ms)"),
                 (f"one_submit_p99_ms_{jobs}", "  a submit's round trip p99 (ms)"),
                 (f"one_start_p50_ms_{jobs}", "  submit to start p50 (ms)"),
                 (f"one_start_p99_ms_{jobs}", "  submit to start p99 (ms)"),
                 (f"one_cpu_ms_per_job_{jobs}", "  CPU per job (ms)"),
                 (f"one_client_cpu_ms_per_job_{jobs}", "  the client's CPU per job (ms)"),
                 (f"list_makespan_s_{jobs}", f"{jobs:,} jobs in one list: makespan (s)"),
                 (f"list_cpu_ms_per_job_{jobs}", "  CPU per job (ms)")]
    rows += [("jobs_lost", "kill -9: jobs lost"),
             ("rerun_s", "kill -9: until its jobs run again (s)"),
             ("claims_tried_per_job_no_wait", "claim: claims tried per job, no wait"),
             ("claims_tried_per_job_random_wait", "claim: claims tried per job, 0-50 ms wait")]
    names = [n for n in ORDER if n in results or n not in ("before", VIA_BROKER)]
    results = {n: results.get(n, {}) for n in names}
    others = [n for n in names if n != "blmove"]
    lines = [f"{'':<40}" + "".join(f"{n:>10}" for n in names)
             + "".join(f"{n + '/blmove':>15}" for n in others)]
    for key, label in rows:
        values = {n: results[n].get(key) for n in names}
        cells = "".join(f"{'-' if v is None else f'{v:.3g}':>10}" for v in values.values())
        base = values["blmove"]
        ratios = "".join(f"{'-' if v is None or not base else f'{v / base:.2f}x':>15}"
                         for v in (values[n] for n in others))
        lines.append(f"{label:<40}{cells}{ratios}")
    return "\n".join(lines)


def rounds_table(results: dict[str, Figures], args: argparse.Namespace) -> str:
    """Each bodega's makespan over the BLMOVE pool's, round by round."""
    blmove = results.get("blmove", {})
    lines = []
    for name in ("before", "bodega"):
        for jobs in args.jobs:
            ours = results.get(name, {}).get(f"makespan_rounds_s_{jobs}")
            theirs = blmove.get(f"makespan_rounds_s_{jobs}")
            if ours and theirs:
                ratios = " ".join(f"{a / b:.2f}x" for a, b in zip(ours, theirs, strict=True))
                lines.append(f"makespan of {jobs:,} jobs, {name}/blmove round by round: "
                             f"{ratios}")
    return "\n".join(lines)


def pool_dir(root: Path, name: str) -> Path:
    """A directory the machines' users reach their batch directories through."""
    path = root / name
    path.mkdir(parents=True)
    for where in (root, path):
        where.chmod(0o755)
    return path


async def main(args: argparse.Namespace) -> Figures:
    root = Path(tempfile.mkdtemp(prefix="bodega-bench-jobs-"))
    try:
        names = (["before"] if args.before_src else []) + args.pools
        roots = {name: pool_dir(root, name) for name in names}
        pools: dict[str, Pool] = {
            name: BodegaPool(roots[name], args.workers, args.slots, args.lease, name=name,
                             src=args.before_src if name == "before" else None,
                             via="broker" if name == VIA_BROKER else args.submit_via)
            if name in ("bodega", "before", VIA_BROKER) else
            RedisPool(name, roots[name], free_port(), args.workers, args.slots, args.lease)
            for name in names}
        results = await measure(pools, roots, args)
        for name, found in results.items():
            print(f"{name}: {json.dumps(found)}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{args.workers} workers x {args.slots} slots each, a process per job; "
          f"{args.runs} dispatches, makespans the median of {args.rounds} rounds taken in "
          f"turn, {args.arrivals} Poisson arrivals per load of {args.service:g} s jobs, "
          f"kill -9 with {args.kill_seconds:g} s jobs:")
    print(table(results, args))
    print(rounds_table(results, args))
    return {"args": {k: v for k, v in vars(args).items() if k != "json"}, **results}


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parse.add_argument("--workers", type=int, default=2)
    parse.add_argument("--slots", type=int, default=4, help="slots per worker")
    parse.add_argument("--jobs", type=lambda s: [int(x) for x in s.split(",")],
                       default=[1000, 10000], help="jobs in each makespan run (a list)")
    parse.add_argument("--runs", type=int, default=30, help="dispatch latency samples")
    parse.add_argument("--rounds", type=int, default=3,
                       help="makespan batches per pool and size, the pools taking turns")
    parse.add_argument("--rhos", type=lambda s: [float(x) for x in s.split(",")],
                       default=[0.5, 0.8, 0.9])
    parse.add_argument("--arrivals", type=int, default=200, help="jobs per load")
    parse.add_argument("--service", type=float, default=1.0, help="seconds a queued job runs")
    parse.add_argument("--kill-seconds", type=float, default=3.0)
    parse.add_argument("--lost-after", type=float, default=30.0,
                       help="kill -9: seconds past twice the lease that the killed worker's "
                            "jobs are given to run again before they count as lost")
    parse.add_argument("--lease", type=float, default=TTL,
                       help="bodega's lease and the BLMOVE workers' heartbeat TTL (s)")
    parse.add_argument("--claim-jobs", type=int, default=40)
    parse.add_argument("--claimers", type=int, default=8)
    parse.add_argument("--pools", type=lambda s: s.split(","),
                       default=["bodega", "blmove", "blpop"])
    parse.add_argument("--phases", type=lambda s: s.split(","), default=list(PHASES),
                       help=f"what to measure, of {','.join(PHASES + MORE_PHASES)} (default: "
                            f"{','.join(PHASES)})")
    parse.add_argument("--singles", type=lambda s: [int(x) for x in s.split(",")],
                       default=[300, 3000],
                       help="jobs submitted one by one, and as one list (a list of sizes)")
    parse.add_argument("--submit-via", choices=("door", "broker"), default="door",
                       help="where bodega's one-task jobs are submitted: straight to each "
                            "job's home at its jobs door (with a pass from POST /sched/pass), "
                            "or to the broker's POST /sched/submit")
    parse.add_argument("--before-src", type=Path, metavar="DIR",
                       help="also measure bodega from this source tree (another commit's "
                            "src/, from git worktree), as the pool 'before'")
    parse.add_argument("--pools-at-once", action="store_true",
                       help="run the queueing, kill -9 and claim phases of every pool side "
                            "by side: a quick run whose figures share the host (a smoke run, "
                            "not a measurement)")
    parse.add_argument("--json", type=Path, help="also write the figures here")
    return parse


if __name__ == "__main__":
    arguments = parser().parse_args()
    # The clients of every pool on uvloop, the loop bodega's daemons run on: a one-by-one
    # submit waits on its client's own turn too, so a slower loop would be counted as the
    # pool's (each pool's client is as lean as its library makes it: aiohttp, redis-py).
    out = uvloop.run(main(arguments))
    if arguments.json:
        arguments.json.write_text(json.dumps(out, indent=1, default=str))
