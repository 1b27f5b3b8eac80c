"""A start moved off a full worker against an ordinary start, through the public API.

Runs ``bodega up`` (one region, two workers of 2 GB each) with a machine of 1 GB (a
Python sleeper, the process driver) and a filler of 1.5 GB. Each round, on the same
machine, alternating so that drift hits both alike:

- **start**: the machine is stopped on a worker with room: ``POST .../start`` starts it
  there (one round trip to its worker, which spawns it);
- **moved**: the machine is stopped and the filler moved onto its worker, which has no
  room for it now: ``POST .../start`` moves it to the other worker and starts it there
  (the broker reserves room on the target, the source hands the record over, the target
  imports it and starts it in one commit).

Each is timed from the start's request until ``GET .../wait?state=started`` answers.
The figures are printed as medians and the ratio moved / start.

    python -m bench.machines.moves [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.python_kit import machine_python

CIDR = "10.251.0.0/16"
TOKEN = "bench-token"
APP = "bench"


async def holder(api: httpx.AsyncClient, workers: list[str]) -> str:
    """The worker holding the one machine of the cluster, once the rows agree."""
    for _ in range(400):
        rows = (await api.get("/v1/cluster/workers")).json()
        counts = {r["name"]: r.get("machines") for r in rows if r["name"] in workers}
        if sorted(counts.values()) == [0, 1]:
            return str(next(name for name, count in counts.items() if count == 1))
        await asyncio.sleep(0.05)
    raise TimeoutError("the workers' rows never agreed on the machine's worker")


async def room_on(api: httpx.AsyncClient, worker: str, memory_mb: int) -> None:
    """Until the broker's view shows ``worker`` with ``memory_mb`` free: a start moved off a
    full worker is placed from the view, as every placement is."""
    for _ in range(400):
        rows = (await api.get("/v1/cluster/workers")).json()
        if any(r["name"] == worker and (r.get("free") or {}).get("memory_mb", 0) >= memory_mb
               for r in rows):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the view never showed {memory_mb} MB free on {worker}")


async def create(api: httpx.AsyncClient, name: str, memory_mb: int) -> str:
    made = await api.post(f"/v1/apps/{APP}/machines", json={"name": name, "config": {
        "image": "local/sleeper", "guest": {"cpus": 1, "memory_mb": memory_mb},
        "init": {"exec": [machine_python(), "-c", "import time; time.sleep(10**6)", name]}}})
    made.raise_for_status()
    mid = str(made.json()["id"])
    await wait(api, mid, "started")
    return mid


async def wait(api: httpx.AsyncClient, mid: str, state: str) -> None:
    (await api.get(f"/v1/apps/{APP}/machines/{mid}/wait",
                   params={"state": state, "timeout": 60})).raise_for_status()


async def stop(api: httpx.AsyncClient, mid: str) -> None:
    (await api.post(f"/v1/apps/{APP}/machines/{mid}/stop")).raise_for_status()
    await wait(api, mid, "stopped")


async def timed_start(api: httpx.AsyncClient, mid: str) -> tuple[float, bool]:
    """Seconds from the start's request until the machine is started; whether it moved."""
    began = time.perf_counter()
    answer = await api.post(f"/v1/apps/{APP}/machines/{mid}/start")
    if answer.status_code != 200:
        raise SystemExit(f"start of {mid}: {answer.status_code} {answer.text}")
    await wait(api, mid, "started")
    return time.perf_counter() - began, bool(answer.json().get("migrated"))


async def move(api: httpx.AsyncClient, mid: str, worker: str) -> None:
    answer = await api.post(f"/v1/apps/{APP}/machines/{mid}/move", json={"worker": worker})
    if answer.status_code != 200 and "already" not in answer.text:
        answer.raise_for_status()


async def measure(api: httpx.AsyncClient, workers: list[str], runs: int) -> tuple[
        list[float], list[float]]:
    (await api.post("/v1/apps", json={"app_name": APP, "org_slug": "personal"})
     ).raise_for_status()
    machine = await create(api, "machine", 1024)
    here = await holder(api, workers)
    there = next(w for w in workers if w != here)
    filler = await create(api, "filler", 1536)
    await move(api, filler, there)
    starts: list[float] = []
    moved: list[float] = []
    for _ in range(runs):
        await stop(api, machine)  # its worker has room: an ordinary start
        seconds, migrated = await timed_start(api, machine)
        assert not migrated, "an ordinary start moved"
        starts.append(seconds)
        await stop(api, machine)
        await move(api, filler, here)  # its worker is full now: the start moves it
        await room_on(api, there, 1024)  # where the filler was, as the view knows it
        seconds, migrated = await timed_start(api, machine)
        assert migrated, "a start on a full worker did not move"
        moved.append(seconds)
        here, there = there, here
    return starts, moved


async def run(runs: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory(prefix="bodega-moves-") as tmp:
        data_dir = Path(tmp) / "up"
        api_port = free_port()
        up = await UpProcess(
            data_dir, "--regions", "ams", "--workers-per-region", "2", "--worker-cpus", "4",
            "--worker-memory-mb", "2048", "--api-port", str(api_port),
            "--proxy-port", str(free_port()), "--proxy-tls-port", str(free_port()),
            "--machine-cidr", CIDR, "--token", TOKEN, "--registry-port", "0").start()
        try:
            await up.until_line("bodega is up", timeout=120)
            workers = sorted(c["name"] for c in up.state()["components"]
                             if c["role"] == "worker")
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=120,
                                         headers={"authorization": f"Bearer {TOKEN}"}) as api:
                return await measure(api, workers, runs)
        finally:
            await up.end()
            await unwire(data_dir)


def report(starts: list[float], moved: list[float]) -> str:
    start, move = statistics.median(starts), statistics.median(moved)
    return (f"start (room on its worker):  median {start * 1000:7.1f} ms over {len(starts)}\n"
            f"moved (its worker full):     median {move * 1000:7.1f} ms over {len(moved)}\n"
            f"moved / start:               {move / start:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(report(*asyncio.run(run(args.runs))))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
