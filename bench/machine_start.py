"""Create+start of a process machine until its program runs, against a bare spawn.

Three ways to run the same program (a Python interpreter whose first
statement writes one byte to a FIFO), each timed until that byte arrives:

- a bare ``asyncio`` spawn of the program (the baseline);
- through the broker's public API, as users call it: ``POST
  /v1/apps/bench/machines`` to a real broker process, which places the machine
  on a real worker process (network namespace, cgroups, the unprivileged user);
- the worker alone: the same create sent straight to the worker's internal API.

Runs interleave (bare, broker, worker), after three warm-ups each. Prints
each median, p90, and the overhead over the bare spawn.

    python -m bench.machine_start [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from tests.leftovers_kit import sweep_data_dir
from tests.tls_kit import TEST_CA, daemon_env

from bodega.wire.worker_client import WorkerClient

TOKEN = "bench-token"
SUBNET = "10.254.9.0/24"
HERE = Path(__file__).resolve().parent
# The program's first statement reports that it runs; then it idles like a server would.
PROGRAM = "import os, sys; os.write(os.open(sys.argv[1], os.O_WRONLY), b'!'); " \
          "import time; time.sleep(600)"


class Signals:
    """FIFOs the programs write their first byte to; each run gets its own."""

    def __init__(self, base: Path) -> None:
        self.dir = base / "fifos"
        self.dir.mkdir()
        self.dir.chmod(0o755)  # the machine's program runs as an unprivileged user
        base.chmod(0o755)
        self.count = 0

    async def timed(self, launch: Callable[[str], Awaitable[Any]],
                    deadline: float = 30.0) -> tuple[float, Any]:
        """Seconds from ``launch(fifo)`` until the program's byte arrives, and what it returned."""
        self.count += 1
        path = self.dir / f"run-{self.count}"
        os.mkfifo(path, 0o666)
        path.chmod(0o666)
        # Opened read-write, the FIFO always has a writer, so it turns readable only on data.
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        loop = asyncio.get_running_loop()
        arrived: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not arrived.done():
                arrived.set_result(None)

        loop.add_reader(fd, readable)
        try:
            start = time.perf_counter()
            launched = await launch(str(path))
            await asyncio.wait_for(arrived, deadline)
            return time.perf_counter() - start, launched
        finally:
            loop.remove_reader(fd)
            os.close(fd)
            path.unlink()


def command(fifo: str) -> list[str]:
    return [sys.executable, "-c", PROGRAM, fifo]


def config(fifo: str) -> dict[str, Any]:
    return {"image": "bench/program", "guest": {"cpu_kind": "shared", "cpus": 1,
                                                "memory_mb": 256},
            "init": {"exec": command(fifo)}, "restart": {"policy": "no"}}


async def bare_spawn(signals: Signals) -> float:
    elapsed, process = await signals.timed(
        lambda fifo: asyncio.create_subprocess_exec(*command(fifo)))
    process.kill()
    await process.wait()
    return elapsed


async def via_worker(signals: Signals, worker: WorkerClient) -> float:
    elapsed, machine = await signals.timed(
        lambda fifo: worker.create_machine({"app": "bench", "config": config(fifo)}))
    await worker.destroy(machine["id"], force=True)
    await worker.wait(machine["id"], "destroyed", timeout=30)
    return elapsed


async def via_broker(signals: Signals, session: aiohttp.ClientSession, url: str,
                     worker: WorkerClient) -> float:
    async def create(fifo: str) -> dict[str, Any]:
        async with session.post(f"{url}/v1/apps/bench/machines",
                                json={"config": config(fifo)}) as response:
            doc: dict[str, Any] = await response.json()
            if response.status != 200:
                raise SystemExit(f"the broker refused the create: {doc}")
            return doc

    elapsed, machine = await signals.timed(create)
    await worker.destroy(machine["id"], force=True)
    await worker.wait(machine["id"], "destroyed", timeout=30)
    return elapsed


async def until_file(path: Path, process: asyncio.subprocess.Process, what: str) -> Any:
    deadline = time.monotonic() + 120
    while not path.exists():  # noqa: ASYNC240 (a small local file, polled)
        if process.returncode is not None or time.monotonic() > deadline:
            raise SystemExit(f"the {what} did not start")
        await asyncio.sleep(0.02)
    return json.loads(path.read_text())  # noqa: ASYNC240


async def start_worker(tmp: Path) -> tuple[asyncio.subprocess.Process, str]:
    ready = tmp / "ready.json"
    TEST_CA.issue(tmp / "w" / "tls", "worker", "bench")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "worker", "--name", "bench", "--region", "ams",
        "--data-dir", str(tmp / "w"), "--listen", "127.0.0.1:0",
        # Room for every run: the broker's static view only ever counts creates as taken.
        "--cpus", "64", "--memory-mb", "65536", "--machine-subnet", SUBNET,
        "--ready-file", str(ready), "--log-level", "warning",
        env={**os.environ, **daemon_env()},
    )
    return process, (await until_file(ready, process, "worker"))["url"]


async def start_broker(tmp: Path, worker: WorkerClient) -> tuple[asyncio.subprocess.Process, str]:
    """A real broker process that knows the worker from a static catalog (no registry)."""
    capacity = await worker.capacity()
    catalog = tmp / "workers.json"
    catalog.write_text(json.dumps([{
        "name": "bench", "region": "ams", "url": worker.base_url, "totals": capacity.totals,
        "used": capacity.used, "cordoned": False}]))
    out = tmp / "broker.json"
    tls = TEST_CA.issue(tmp / "broker-tls", "broker", "bench-broker")
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / "fleet.py"), "broker", "--workers", str(catalog),
        "--token", TOKEN, "--out", str(out), "--tls-dir", str(tls),
        env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    return process, (await until_file(out, process, "broker"))["url"]


def line(name: str, times: list[float], bare: float) -> str:
    median = statistics.median(times)
    p90 = statistics.quantiles(times, n=10)[-1]
    return (f"  {name:<26} {median * 1000:7.1f} ms  p90 {p90 * 1000:6.1f} ms   "
            f"+{(median - bare) * 1000:5.1f} ms  {median / bare:5.2f}x")


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bodega-start-") as name:
        tmp = Path(name)
        signals = Signals(tmp)
        worker_process, worker_url = await start_worker(tmp)
        worker = WorkerClient(worker_url, TEST_CA.context("broker"), timeout=30)
        broker_process = None
        session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})
        try:
            broker_process, url = await start_broker(tmp, worker)
            async with session.post(f"{url}/v1/apps",
                                    json={"app_name": "bench", "org_slug": "personal"}) as r:
                r.raise_for_status()
            times: dict[str, list[float]] = {"bare": [], "broker": [], "worker": []}
            for run in range(3 + runs):  # interleaved, so drift affects all alike
                measured = {"bare": await bare_spawn(signals),
                            "broker": await via_broker(signals, session, url, worker),
                            "worker": await via_worker(signals, worker)}
                if run >= 3:  # the first three warm the page cache and the code paths
                    for key, elapsed in measured.items():
                        times[key].append(elapsed)
        finally:
            await session.close()
            await worker.aclose()
            if broker_process is not None:
                broker_process.send_signal(signal.SIGTERM)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(broker_process.wait(), 30)
            worker_process.terminate()
            await worker_process.wait()
            await sweep_data_dir(tmp / "w")  # the worker keeps its machines' networks
    bare = statistics.median(times["bare"])
    mode = "netns + cgroups + unprivileged user" if os.geteuid() == 0 else "host network"
    print(f"machine start ({mode}), shared-cpu-1x, {runs} runs each, "
          "median until the program's first statement runs:")
    print(f"  {'bare asyncio spawn':<26} {bare * 1000:7.1f} ms  "
          f"p90 {statistics.quantiles(times['bare'], n=10)[-1] * 1000:6.1f} ms")
    print(line("through the broker (API)", times["broker"], bare))
    print(line("worker alone", times["worker"], bare))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    asyncio.run(main(parser.parse_args().runs))
