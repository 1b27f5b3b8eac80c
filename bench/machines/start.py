"""Create+start of a process machine until its program runs, on ``bodega up``, against a bare spawn.

The program is a Python interpreter whose first statement writes one byte to a FIFO;
each clock stops when that byte arrives. Timed in turn, run after run:

- a bare ``asyncio`` spawn of the program (the baseline);
- ``bodega up`` as a user runs it (one region, one worker, its image registry, the
  proxy and the gossip registry all running; its own data dir, free ports): ``POST
  /v1/apps/bench/machines`` through the public API, the machine in a network namespace
  and cgroups, as the unprivileged user;
- the rig (``bench/rigs/start_rig.py``, the second line): the same create through a broker that
  knows one worker from a static catalog, no registry, no proxy; and the same create
  sent straight to that worker.

Prints each median and p90, the overhead over the bare spawn, the host's load average
beside them, and where the time goes on ``bodega up`` (``bench/rigs/start_stages.py``). ``--profile
DIR`` records the broker and the worker of ``bodega up`` with py-spy meanwhile.
``--at-rest N`` first leaves N machines at rest on the worker (created, never started),
as a worker holding an app scaled to zero does.

    python -m bench.machines.start [--runs 20] [--only up|rig] [--profile DIR] [--at-rest N]
        [--up-arg=--no-private-network]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port
from tests.leftovers_kit import sweep_data_dir
from tests.python_kit import machine_python
from tests.tls_kit import TEST_CA

from bench.rigs.start_rig import start_broker, start_worker
from bench.rigs.start_stages import (
    MOST_AT_REST,
    Marks,
    breakdown,
    component_pids,
    cpu_seconds,
    leave_at_rest,
    profiled,
    room_for,
    stop_profiles,
)
from bodega.runtime.waits import when_readable
from bodega.wire.internal.worker_client import WorkerClient

TOKEN = "bench-token"
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
        arrived = when_readable(fd)
        try:
            start = time.perf_counter()
            launched = await launch(str(path))
            await asyncio.wait_for(arrived, deadline)
            return time.perf_counter() - start, launched
        finally:
            arrived.cancel()  # no longer watched
            os.close(fd)
            path.unlink()


def command(fifo: str) -> list[str]:
    return [machine_python(), "-c", PROGRAM, fifo]


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


class Api:
    """The public Machines API of one broker, as a user's client calls it."""

    def __init__(self, url: str, token: str) -> None:
        self.url = f"{url}/v1/apps/bench/machines"
        self.session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"})

    async def make_app(self) -> None:
        async with self.session.post(self.url.removesuffix("/bench/machines"),
                                     json={"app_name": "bench", "org_slug": "personal"}) as r:
            r.raise_for_status()

    async def create(self, fifo: str) -> tuple[dict[str, Any], float]:
        async with self.session.post(self.url, json={"config": config(fifo)}) as response:
            doc: dict[str, Any] = await response.json()
            if response.status != 200:
                raise SystemExit(f"the broker refused the create: {doc}")
            return doc, time.time()

    async def get(self, path: str, **params: str) -> dict[str, Any]:
        async with self.session.get(f"{self.url}/{path}", params=params) as response:
            doc: dict[str, Any] = await response.json()
            return doc

    async def destroy(self, machine_id: str) -> None:
        async with self.session.delete(f"{self.url}/{machine_id}", params={"force": "true"}):
            pass
        await self.get(f"{machine_id}/wait", state="destroyed", timeout="30")

    async def start(self, signals: Signals) -> tuple[float, Marks]:
        """One create+start, timed; then the broker's and the worker's marks of it."""
        call = time.time()
        elapsed, (machine, answered) = await signals.timed(self.create)
        runs = call + elapsed
        await self.get(f"{machine['id']}/wait", state="started", timeout="30")
        marks = Marks.of(call, answered, runs, await self.get(machine["id"]),
                         await self.get(f"{machine['id']}/placement"))
        await self.destroy(machine["id"])
        return elapsed, marks


async def via_worker(signals: Signals, worker: WorkerClient) -> float:
    elapsed, machine = await signals.timed(
        lambda fifo: worker.create_machine({"app": "bench", "config": config(fifo)}))
    await worker.destroy(machine.id, force=True)
    await worker.wait(machine.id, "destroyed", timeout=30)
    return elapsed


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def line(name: str, times: list[float], bare: float) -> str:
    median = statistics.median(times)
    p90 = statistics.quantiles(times, n=10)[-1]
    return (f"  {name:<30} {median * 1000:7.1f} ms  p90 {p90 * 1000:6.1f} ms   "
            f"{(median - bare) * 1000:+5.1f} ms  {median / bare:5.2f}x")


async def main(runs: int, only: str | None, profile: Path | None, at_rest: int,
               up_args: tuple[str, ...] = ()) -> None:
    with tempfile.TemporaryDirectory(prefix="bodega-start-") as name:
        tmp = Path(name)
        signals = Signals(tmp)
        up: UpProcess | None = None
        rig: list[asyncio.subprocess.Process] = []
        apis: dict[str, Api] = {}
        worker: WorkerClient | None = None
        spies: list[asyncio.subprocess.Process] = []
        os.environ["BODEGA_CONFIG"] = str(tmp / "contexts.toml")  # not the user's contexts
        times: dict[str, list[float]] = {"bare": [], "up": [], "broker": [], "worker": []}
        marks: list[Marks] = []
        loads = [load()]
        cpu: dict[str, float] = {}
        parked = ""
        try:
            if only != "rig":
                up = await UpProcess(
                    tmp / "cluster", "--regions", "ams", "--workers-per-region", "1",
                    "--api-port", str(free_port()), "--proxy-port", str(free_port()),
                    "--proxy-tls-port", str(free_port()),
                    # Machines on a range no test or other bench holds (tests/cidr_kit.py).
                    "--machine-cidr", machine_cidr(200, 232), "--log-level", "info",
                    *room_for(at_rest), *up_args).start()
                await up.until_line("bodega is up")
                apis["up"] = Api(up.state()["api_url"], up.token())
            if only != "up":
                worker_process, worker_url = await start_worker(tmp)
                rig.append(worker_process)
                worker = WorkerClient(worker_url, TEST_CA.context("broker"), timeout=30)
                broker_process, url = await start_broker(tmp, worker, TOKEN)
                rig.append(broker_process)
                apis["broker"] = Api(url, TOKEN)
            for api in apis.values():
                await api.make_app()
            if up is not None:
                await leave_at_rest(apis["up"].session, up.state()["api_url"], at_rest)
            try:
                for run in range(3 + runs):  # interleaved, so drift affects all alike
                    if run == 3 and up is not None:
                        cpu = {k: -cpu_seconds(p) for k, p in component_pids(up.data_dir).items()}
                        if profile is not None:
                            spies = await profiled(up.data_dir, profile)
                    measured = {"bare": await bare_spawn(signals)}
                    for key, api in apis.items():
                        measured[key], stamped = await api.start(signals)
                        if key == "up" and run >= 3:
                            marks.append(stamped)
                    if worker is not None:
                        measured["worker"] = await via_worker(signals, worker)
                    if run >= 3:  # the first three warm the page cache and the code paths
                        for key, elapsed in measured.items():
                            times[key].append(elapsed)
            except SystemExit:
                if up is not None:  # what the cluster said, before its data dir goes
                    for name in ("ams-1", "broker"):
                        text = (up.data_dir / "logs" / f"{name}.log").read_text()
                        print(f"-- the end of {name}.log:", *text.splitlines()[-15:], sep="\n")
                raise
            loads.append(load())
            if up is not None:
                cpu = {k: (cpu[k] + cpu_seconds(p)) / runs
                       for k, p in component_pids(up.data_dir).items()}
                log = (up.data_dir / "logs" / "ams-1.log").read_text()
                parked = f"{log.count('from a parked launcher')} of {3 + runs}"
        finally:
            await stop_profiles(spies)
            for api in apis.values():
                await api.session.close()
            if worker is not None:
                await worker.aclose()
            for process in reversed(rig):
                process.send_signal(signal.SIGTERM)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), 30)
            if up is not None:
                await up.stop()
                await sweep_data_dir(tmp / "cluster")
            if rig:
                await sweep_data_dir(tmp / "w")  # the worker keeps its machines' networks
    report(times, marks, runs, loads, cpu, parked, at_rest)


def report(times: dict[str, list[float]], marks: list[Marks], runs: int,
           loads: list[str], cpu: dict[str, float], parked: str, at_rest: int = 0) -> None:
    bare = statistics.median(times["bare"])
    mode = "netns + cgroups + unprivileged user" if os.geteuid() == 0 else "host network"
    print(f"machine start ({mode}), shared-cpu-1x, {runs} runs each, median until the "
          f"program's first statement runs; load average {loads[0]} before, "
          f"{loads[-1]} after" + (f"; {at_rest} machines at rest on the worker:"
                                  if at_rest else ":"))
    print(f"  {'bare asyncio spawn':<30} {bare * 1000:7.1f} ms  "
          f"p90 {statistics.quantiles(times['bare'], n=10)[-1] * 1000:6.1f} ms")
    for key, label in (("up", "bodega up, public API"), ("broker", "rig: broker, static view"),
                       ("worker", "rig: worker alone")):
        if times[key]:
            print(line(label, times[key], bare))
    if marks:
        print("  bodega up, where the time goes (medians; broker's and worker's timestamps):")
        for label, seconds in breakdown(marks):
            print(f"    {label:<48} {seconds * 1000:6.1f} ms")
    if parked:
        print(f"  bodega up: {parked} starts from a parked launcher")
    if cpu:
        print("  bodega up, CPU per create+start+destroy (with the bench's reads): " + ", ".join(
            f"{role} {seconds * 1000:.1f} ms" for role, seconds in sorted(cpu.items())))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", choices=("up", "rig"), help="one side only (and the baseline)")
    parser.add_argument("--profile", type=Path, help="py-spy the up cluster's broker and worker "
                        "into DIR (raw collapsed stacks)")
    parser.add_argument("--at-rest", type=int, default=0, metavar="N",
                        help="first leave N machines at rest on the bodega up worker (at most "
                        f"{MOST_AT_REST}: a worker has a /24 of addresses)")
    parser.add_argument("--up-arg", action="append", default=[], metavar="FLAG",
                        help="a flag for bodega up, e.g. --up-arg=--no-private-network "
                             "(repeatable)")
    args = parser.parse_args()
    if not 0 <= args.at_rest <= MOST_AT_REST:
        parser.error(f"--at-rest takes 0 to {MOST_AT_REST} machines")
    asyncio.run(main(args.runs, args.only, args.profile, args.at_rest, tuple(args.up_arg)))
