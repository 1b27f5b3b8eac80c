"""An app's machine list (and its app answer) beside destroyed machines still in the view.

A destroyed machine's row stays in the view for the worker's tombstone TTL (an hour
by default), so an app that deploys often carries hundreds of them. On one real
``bodega up`` (null driver, two workers), app ``live`` holds ``--live`` machines and
app ``churn`` the same number plus ``--destroyed`` destroyed ones; both are listed in
turn, ``--rounds`` times, through the public API. The ``live`` app is the baseline:
the same answer with nothing destroyed beside it. Prints the medians and the ratio.

    python -m bench.machines.listing [--destroyed 300] [--live 10] [--rounds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port
from tests.leftovers_kit import sweep_data_dir

from bench.rigs.placement_up import load

CREATE = {"config": {"image": "bench:1", "guest": {"cpu_kind": "shared", "cpus": 1,
                                                   "memory_mb": 256}}, "skip_launch": True}


async def fill(api: httpx.AsyncClient, app: str, live: int, destroyed: int) -> None:
    (await api.post("/v1/apps", json={"app_name": app, "org_slug": "personal"})) \
        .raise_for_status()
    for n in range(live + destroyed):
        made = await api.post(f"/v1/apps/{app}/machines", json=CREATE)
        made.raise_for_status()
        if n >= live:
            (await api.delete(f"/v1/apps/{app}/machines/{made.json()['id']}",
                              params={"force": "true"})).raise_for_status()


async def timed(api: httpx.AsyncClient, path: str) -> float:
    began = time.perf_counter()
    (await api.get(path)).raise_for_status()
    return time.perf_counter() - began


async def main(destroyed: int, live: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bodega-list-") as name:
        tmp = Path(name)
        os.environ["BODEGA_CONFIG"] = str(tmp / "contexts.toml")  # not the user's contexts
        up = UpProcess(tmp / "cluster", "--regions", "ams", "--workers-per-region", "2",
                       "--driver", "null", "--worker-cpus", "256",
                       "--worker-memory-mb", "262144", "--api-port", str(free_port()),
                       "--proxy-port", str(free_port()), "--proxy-tls-port", str(free_port()),
                       "--machine-cidr", machine_cidr(60, 70), "--log-level", "warning")
        await up.start()
        try:
            await up.until_line("bodega is up", timeout=600)
            auth = {"Authorization": f"Bearer {up.token()}"}
            async with httpx.AsyncClient(base_url=up.state()["api_url"], headers=auth,
                                         timeout=60) as api:
                await fill(api, "live", live, 0)
                await fill(api, "churn", live, destroyed)
                await asyncio.sleep(5)  # every row reaches the broker's view
                times: dict[str, list[float]] = {}
                paths = [f"/v1/apps/{app}{tail}" for tail in ("/machines", "")
                         for app in ("live", "churn")]
                print(f"bodega up, 2 null-driver workers; load {load()}")
                for _ in range(rounds):  # interleaved, so drift hits both alike
                    for path in paths:
                        times.setdefault(path, []).append(await timed(api, path))
                for path in paths:
                    print(f"  GET {path:<24} median {statistics.median(times[path]) * 1000:6.2f}"
                          f" ms over {rounds}")
                for tail in ("/machines", ""):
                    base = statistics.median(times[f"/v1/apps/live{tail}"])
                    churn = statistics.median(times[f"/v1/apps/churn{tail}"])
                    print(f"  {tail or '/ (the app)'}: {destroyed} destroyed beside it costs "
                          f"{(churn - base) * 1000:+.2f} ms, {churn / base:.2f}x")
        finally:
            await up.end()
            await sweep_data_dir(tmp / "cluster")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--destroyed", type=int, default=300)
    parser.add_argument("--live", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    asyncio.run(main(args.destroyed, args.live, args.rounds))
