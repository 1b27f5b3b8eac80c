"""``python -m tests.cluster.chaos`` (``make chaos``): a campaign, then its table.

A campaign (``campaign.py``) is the cluster a user runs, five hosts joined
with the CLI, under ``--faults`` overlapping faults planned from ``--seed``
(one per 150 operations, at least 100, unless given) while clients send at
least ``--operations`` requests. ``--scenarios`` runs the older
one-fault-at-a-time scenarios on a cluster of separately started daemons
instead (``--ops N`` requests per client and scenario, ``--only
NAME`` to pick some).

Exit status 1 if any invariant was violated (or a scenario could not run).
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

from . import campaign, history, host_faults, scenarios
from .cluster import Cluster, netns_cluster
from .observe import kernel_inventory
from .peers import peers_cluster
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


def run_campaign(seed: int, operations: int, faults: int, tmp: Path,
                 report_file: Path | None) -> bool:
    before = kernel_inventory(tmp)
    t0 = time.monotonic()
    with peers_cluster(tmp) as peers:
        print(f"five hosts joined, the web app on each, in {time.monotonic() - t0:.0f}s",
              flush=True)
        report = asyncio.run(campaign.campaign(peers, seed, operations, faults))
        for v in report.violations:  # before the teardown, which may take a while or fail
            print(f"  [{v.invariant}] {v.detail}", flush=True)
    # A namespace's links and tables go some moments after the namespace is deleted.
    deadline = time.monotonic() + 30
    while history.kernel_clean(before, after := kernel_inventory(tmp)) \
            and time.monotonic() < deadline:
        time.sleep(1)
    left = history.kernel_clean(before, after)
    for v in left:
        print(f"  [{v.invariant}] {v.detail}", flush=True)
    report.violations += left
    text = campaign.table(report)
    print(f"\n{text}\n", flush=True)
    if report_file is not None:
        report_file.write_text(text + "\n")
    return not report.violations


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.chaos")
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--operations", type=int, default=10_000,
                        help="API requests the clients send at least (a campaign)")
    parser.add_argument("--faults", type=int,
                        help="faults (a campaign); by default one per 150 operations, at "
                             "least 100, so a longer run is about as hard as a short one")
    parser.add_argument("--report", type=Path, help="write the campaign's table here too")
    parser.add_argument("--scenarios", action="store_true",
                        help="the one-fault scenarios on separately started daemons instead")
    parser.add_argument("--ops", type=int, default=25, help="requests per client per scenario")
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--keep", action="store_true",
                        help="keep the logs directory even when nothing was violated")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("the chaos suite needs root (network namespaces, nftables, tmpfs)")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bodega-chaos-"))
    if not args.scenarios:
        tmp.chmod(0o755)  # the web app's machines run as an unprivileged user and read it
        print(f"seed {args.seed}; logs in {tmp}", flush=True)
        faults = args.faults if args.faults is not None else max(100, args.operations // 150)
        ok = run_campaign(args.seed, args.operations, faults, tmp, args.report)
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"logs kept in {tmp}")
        return 0 if ok else 1
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
