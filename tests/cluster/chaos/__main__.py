"""``python -m tests.cluster.chaos``: every scenario on one cluster, then a table.

Exit status 1 if any invariant was violated (or a scenario could not run).
``--ops N`` sets the requests per client and scenario; ``--only NAME`` runs
some scenarios (repeatable).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path

from . import host_faults, scenarios
from .cluster import Cluster, netns_cluster
from .scenario import Result, clear, members_alive
from .state import Violation

Scenario = Callable[[Cluster, int, int], Awaitable[Result]]
SCENARIOS: dict[str, Scenario] = {
    "kill9": scenarios.kill9,
    "partition": scenarios.partition,
    "gossip-loss": scenarios.gossip_loss,
    "slow-worker": scenarios.slow_worker,
    "worker-restart": lambda c, ops, seed: host_faults.worker_restart(c, seed),
    "disk-full": lambda c, ops, seed: host_faults.disk_full(c, seed),
    "proxy-failover": lambda c, ops, seed: host_faults.proxy_failover(c, seed),
}


def table(results: list[Result]) -> str:
    rows = [("scenario", "operations", "faults injected", "violations", "convergence")]
    for r in results:
        faults = f"{len(r.faults)}: {r.faults[0]}{' ...' if len(r.faults) > 1 else ''}" \
            if r.faults else "0"
        rows.append((r.name, str(r.operations), faults, str(len(r.violations)),
                     f"{r.convergence:.1f} s" if r.convergence is not None else "not reached"))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
             + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


async def run(names: list[str], ops: int, seed: int, tmp: Path) -> list[Result]:
    results: list[Result] = []
    started = time.monotonic()
    async with netns_cluster(tmp) as c:
        if not await members_alive(c):
            raise RuntimeError("the cluster never came together")
        print(f"cluster up in {time.monotonic() - started:.1f}s ({len(c.nodes)} hosts)",
              flush=True)
        for i, name in enumerate(names):
            t0 = time.monotonic()
            try:
                result = await SCENARIOS[name](c, ops, seed + i)
            except Exception as exc:
                result = Result(name, violations=[Violation(
                    invariant="scenario-ran", detail=f"{exc!r}")])
                traceback.print_exc()
                await heal_all(c)
            if not await clear(c, result.apps):
                result.violations.append(Violation(
                    invariant="cleanup", detail=f"machines of {result.apps} not all destroyed"))
            results.append(result)
            print(f"{name}: {time.monotonic() - t0:.1f}s, {len(result.violations)} violations",
                  flush=True)
            if result.faults:
                print(f"  faults: {'; '.join(result.faults)}", flush=True)
            for v in result.violations:
                print(f"  [{v.invariant}] {v.detail}", flush=True)
            for note in result.notes:
                print(f"  note: {note}", flush=True)
    return results


async def heal_all(c: Cluster) -> None:
    """After a scenario that broke: no partition, no loss, no delay, every daemon running."""
    await c.hosts.heal()
    await c.hosts.stop_losing()
    for node in c.nodes:
        if node.relay:
            c.delay_file(node).write_text("0")
        if not c.alive(node):
            await c.start(node)
    await members_alive(c)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.chaos")
    parser.add_argument("--ops", type=int, default=25, help="requests per client per scenario")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 10_000)
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--keep", action="store_true",
                        help="keep the logs directory even when nothing was violated")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("the chaos suite needs root (network namespaces, nftables, tmpfs)")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bodega-chaos-"))
    print(f"seed {args.seed}; logs in {tmp}", flush=True)
    t0 = time.monotonic()
    results = asyncio.run(run(args.only or list(SCENARIOS), args.ops, args.seed, tmp))
    print(f"\n{table(results)}\n\ntotal {time.monotonic() - t0:.0f}s", flush=True)
    failed = any(not r.ok for r in results)
    if failed or args.keep:
        print(f"logs kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
