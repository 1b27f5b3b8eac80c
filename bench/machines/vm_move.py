"""A running vm machine moved live, against a cold move of the same VM, on ``bodega up``.

Runs ``bodega up`` (one region, two workers), deploys one vm machine (busybox httpd in a
VM serving a counter its program keeps in the guest's tmpfs) and moves it between the
two workers:

- **live**, ``--runs`` times: ``POST .../move`` while the guest runs; the VM's memory
  goes with it (``docs/worker.md``, "A live move"). Timed from the request to its answer
  (the move's total time); the guest's pause as the target's event says it (qemu's last
  round and the root disk after it, until the target's ``cont``); and, from outside, the
  longest gap between two answers of the counter polled through the proxy every 5 ms.
  Every round checks the guest was not rebooted (its boot id) and its counter went on.
- **cold**, ``--cold`` times: the move as it is for any other machine, by hand: stop,
  move, start; timed from the stop's request until the counter answers again (a new
  boot, the counter from zero).

    python -m bench.machines.vm_move [--runs 10] [--cold 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx
from tests.cluster.deploy_kit import Cli, readable_dir, up_cluster
from tests.cluster.vm_live_kit import Gaps, polled, polled_directly, read, vm_app

APP = "bench-vm"
T = TypeVar("T")


async def until(check: Callable[[], Awaitable[T | None]], timeout: float = 120.0,
                every: float = 0.005) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = await check()
        if answer:
            return answer
        await asyncio.sleep(every)
    raise TimeoutError(f"{check} never answered")


class Bench:
    def __init__(self, cli: Cli, api: httpx.AsyncClient, workers: list[str]) -> None:
        self.cli = cli
        self.api = api
        self.workers = workers

    async def where(self) -> str:
        """The worker holding the one machine, once the rows agree."""
        async def agreed() -> str | None:
            rows = (await self.api.get("/v1/cluster/workers")).json()
            counts = {r["name"]: r.get("machines") for r in rows if r["name"] in self.workers}
            if sorted(counts.values()) == [0, 1]:
                return str(next(name for name, count in counts.items() if count == 1))
            return None
        return await until(agreed, every=0.05)

    async def count(self) -> int | None:
        said = await read(self.cli, APP, "/count")
        return int(said) if said and said.isdigit() else None

    async def paused_ms(self, mid: str) -> int:
        events = (await self.api.get(f"/v1/apps/{APP}/machines/{mid}/events")).json()
        live = [e for e in events if (e.get("request") or {}).get("migrated")]
        newest = max(live, key=lambda e: e["timestamp"])
        if newest["request"]["migrated"] != "live":
            raise SystemExit(f"the move fell back to a cold start: {newest['request']}")
        return int(newest["request"]["downtime_ms"])

    async def live(self, mid: str) -> tuple[float, int, Gaps, Gaps]:
        here = await self.where()
        there = next(w for w in self.workers if w != here)
        boot, before = await read(self.cli, APP, "/boot"), await self.count()
        async with polled(self.cli, APP) as gaps, \
                polled_directly(self.api, APP, mid) as direct:
            began = time.perf_counter()
            answer = await self.api.post(f"/v1/apps/{APP}/machines/{mid}/move",
                                         json={"worker": there})
            took = time.perf_counter() - began
            answer.raise_for_status()
            await until(self.count)
            await asyncio.sleep(1.0)
        after = await self.count()
        if await read(self.cli, APP, "/boot") != boot or not (after or 0) > (before or 0):
            raise SystemExit(f"round lost the guest's memory: {before} -> {after}")
        return took, await self.paused_ms(mid), gaps, direct

    async def cold(self, mid: str) -> float:
        here = await self.where()
        there = next(w for w in self.workers if w != here)
        base = f"/v1/apps/{APP}/machines/{mid}"
        began = time.perf_counter()
        (await self.api.post(f"{base}/stop")).raise_for_status()
        (await self.api.get(f"{base}/wait", params={"state": "stopped", "timeout": 60})
         ).raise_for_status()
        (await self.api.post(f"{base}/move", json={"worker": there})).raise_for_status()
        (await self.api.post(f"{base}/start")).raise_for_status()
        await until(self.count)
        return time.perf_counter() - began


Live = tuple[float, int, Gaps, Gaps]


async def run(runs: int, colds: int) -> tuple[list[Live], list[float]]:
    with tempfile.TemporaryDirectory(prefix="bench-vm-move-") as tmp:
        async with up_cluster(Path(tmp)) as (cli, up):
            workers = sorted(c["name"] for c in up.state()["components"]
                             if c["role"] == "worker")
            with readable_dir() as apps:
                await cli.ok("deploy", "-c", str(vm_app(apps, APP)))
            machines = await cli.machines(APP)
            for extra in machines[1:]:
                await cli.ok("machine", "destroy", extra["id"], "-a", APP, "--force")
            mid = machines[0]["id"]
            async with httpx.AsyncClient(
                    base_url=cli.env["BODEGA_API_URL"], timeout=120, headers={
                        "authorization": f"Bearer {cli.env['BODEGA_API_TOKEN']}"}) as api:
                bench = Bench(cli, api, workers)
                await until(bench.count)
                lives = [await bench.live(mid) for _ in range(runs)]
                colds_ = [await bench.cold(mid) for _ in range(colds)]
    return lives, colds_


def report(lives: list[Live], colds: list[float]) -> str:
    took = [t * 1000 for t, _, _, _ in lives]
    paused = [p for _, p, _, _ in lives]
    gaps = [g.longest * 1000 for _, _, g, _ in lives]
    failed = sum(g.failed for _, _, g, _ in lives)
    asked = sum(g.failed + g.answered for _, _, g, _ in lives)
    direct = [d.longest * 1000 for _, _, _, d in lives if d.answered]
    cold = [c * 1000 for c in colds]
    return "\n".join([
        f"live moves of a running vm machine, {len(lives)} rounds:",
        f"  the guest paused (its event): p50 {statistics.median(paused):.0f} ms, "
        f"max {max(paused)} ms",
        f"  longest gap through the proxy, polled every 5 ms: p50 "
        f"{statistics.median(gaps):.0f} ms, max {max(gaps):.0f} ms "
        f"({failed} of {asked} requests failed)",
        "  longest gap at the guest's own addresses (the old, then the new), every 5 ms: "
        + (f"p50 {statistics.median(direct):.0f} ms, max {max(direct):.0f} ms"
           if direct else "not reachable from here"),
        f"  the move, request to answer: p50 {statistics.median(took):.0f} ms, "
        f"max {max(took):.0f} ms",
        f"cold moves of the same VM (stop, move, start), {len(cold)} rounds: until it "
        f"answers again p50 {statistics.median(cold):.0f} ms, max {max(cold):.0f} ms",
        f"cold / live (the guest's time without answers, p50): "
        f"{statistics.median(cold) / statistics.median(gaps):.1f}x",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cold", type=int, default=3)
    args = parser.parse_args()
    print(report(*asyncio.run(run(args.runs, args.cold))))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
