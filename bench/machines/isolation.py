"""Isolation's cost on ``bodega up``, through the Machines API, beside the runtimes alone.

Runs ``bodega up`` (one region, one worker of ``WORKER_MEMORY_MB``, its own image
registry holding a small busybox httpd image) and, for ``container``, ``sandbox`` and
``vm`` (``config.guest.isolation``), 128 MB machines:

- **start**: ``POST /v1/apps/bench/machines`` until the machine's private address answers
  HTTP (the worker's routes reach it from the host), each run beside its baseline
  (``bench/machines/isolation_bare.py``): the runtime alone on the same bundle or disks, in a
  fresh namespace, to the same first answer. One untimed warm-up of each first (the
  image pulled, a vm's ext4 root made);
- **resume**: a started machine suspended, then ``POST .../start`` until it answers,
  against its cold start above;
- **idle fit**: machines created one after another, each until it answers, until the
  API refuses one (412) or ``--vm-cap`` vms (each boot under tcg eats a core for
  seconds); then, idle, what the worker's ledger charges for them and what they hold:
  each machine's memory cgroup, the RSS of its processes, and the host's
  ``MemAvailable`` drop over the fill.

    python -m bench.machines.isolation [--runs 3] [--vm-cap 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.integration.images.image_kit import build_image

from bench.machines.isolation_bare import (
    QUIET_SECONDS,
    Bare,
    MachineFiles,
    container_runtimes,
    first_answer,
    sweep,
)

CIDR = "10.243.0.0/16"
WORKER_MEMORY_MB = 4096
MEMORY_MB = 128
ISOLATIONS = ("container", "sandbox", "vm")


@dataclass
class Side:
    """One isolation's figures."""

    starts: list[float] = field(default_factory=list)
    bare: dict[str, list[float]] = field(default_factory=dict)  # baseline name -> starts
    resumes: list[float] = field(default_factory=list)
    fit: Fit | None = None


@dataclass
class Fit:
    answered: int
    refused: str  # the refusal's message, or why the fill stopped
    ledger_mb: float  # what the worker's ledger charges per machine
    free_mb: int  # what its ledger had free before the fill
    cgroup_mb: list[float]
    rss_mb: list[float]
    available_drop_mb: float  # the host's MemAvailable drop over the fill, per machine


class Api:
    def __init__(self, http: httpx.AsyncClient, workers: Path, image: str) -> None:
        self.http = http
        self.workers = workers  # the cluster's workers' data dirs
        self.image = image

    async def create(self, isolation: str) -> httpx.Response:
        return await self.http.post("/v1/apps/bench/machines", json={"config": {
            "image": self.image, "guest": {"cpus": 1, "memory_mb": MEMORY_MB,
                                         "isolation": isolation}}})

    async def address(self, machine_id: str) -> str:
        """The machine's private address: IPv4 of the machine range, the cluster run
        without the private network (with it, a warm-up timed out on a 6PN address)."""
        while True:
            machine = (await self.http.get(f"/v1/apps/bench/machines/{machine_id}")).json()
            if machine.get("private_ip"):
                return str(machine["private_ip"])
            await asyncio.sleep(0.005)

    async def start(self, isolation: str) -> tuple[float, str]:
        """Seconds from the create call until the machine answers; its id."""
        await asyncio.sleep(QUIET_SECONDS)
        began = time.perf_counter()
        created = await self.create(isolation)
        created.raise_for_status()
        machine_id = str(created.json()["id"])
        return await first_answer(await self.address(machine_id), began, 120.0), machine_id

    async def wait(self, machine_id: str, state: str) -> None:
        (await self.http.get(f"/v1/apps/bench/machines/{machine_id}/wait",
                             params={"state": state, "timeout": 60})).raise_for_status()

    async def destroy(self, *machine_ids: str) -> None:
        """Destroy and wait until gone, so no teardown overlaps the next start."""
        async def one(machine_id: str) -> None:
            await self.http.delete(f"/v1/apps/bench/machines/{machine_id}",
                                   params={"force": "true"})
            await self.wait(machine_id, "destroyed")
        for start in range(0, len(machine_ids), 8):
            await asyncio.gather(*(one(mid) for mid in machine_ids[start:start + 8]))

    async def ledger(self) -> tuple[int, int]:
        """The worker's ledger: memory MB committed and its machines, as published."""
        [worker] = (await self.http.get("/v1/cluster/workers")).json()
        return int(worker["used"]["memory_mb"]), int(worker.get("machines") or 0)

    async def offered(self) -> list[str]:
        [worker] = (await self.http.get("/v1/cluster/workers")).json()
        return list(worker["totals"].get("isolations") or [])


async def starts(api: Api, bare: Bare, isolation: str, runs: int, side: Side) -> None:
    """Warm-up, then each run's create beside its baselines, in turn."""
    _, warm = await api.start(isolation)
    files = MachineFiles.of(api.workers, warm)
    await api.destroy(warm)
    baselines: dict[str, Any] = {}
    if isolation == "container":
        for name, runtime in container_runtimes().items():
            baselines[f"{name} run"] = lambda runtime=runtime: bare.container(files, runtime)
    elif isolation == "sandbox":
        baselines["runsc run"] = lambda: bare.sandbox(files)
    else:
        baselines["bare qemu boot"] = lambda: bare.vm(files, MEMORY_MB)
    for run in baselines.values():
        await run()  # their warm-up
    for _ in range(runs):
        elapsed, machine_id = await api.start(isolation)
        side.starts.append(elapsed)
        await api.destroy(machine_id)
        for name, run in baselines.items():
            side.bare.setdefault(name, []).append(await run())


async def resumes(api: Api, isolation: str, runs: int, side: Side) -> None:
    _, machine_id = await api.start(isolation)
    address = await api.address(machine_id)
    for _ in range(runs):
        (await api.http.post(f"/v1/apps/bench/machines/{machine_id}/suspend")
         ).raise_for_status()
        await api.wait(machine_id, "suspended")
        await asyncio.sleep(QUIET_SECONDS)
        began = time.perf_counter()
        (await api.http.post(f"/v1/apps/bench/machines/{machine_id}/start")
         ).raise_for_status()
        side.resumes.append(await first_answer(address, began, 120.0))
    await api.destroy(machine_id)


def cgroup_of(machine_id: str) -> Path | None:
    return next(Path("/sys/fs/cgroup/memory/bodega").glob(f"*/{machine_id}"), None)


def held_mb(machine_id: str) -> tuple[float, float]:
    """The machine's memory cgroup usage and the RSS of the processes in it, in MB."""
    cgroup = cgroup_of(machine_id)
    if cgroup is None:
        return 0.0, 0.0
    usage = int((cgroup / "memory.usage_in_bytes").read_text())
    rss = 0
    for pid in (cgroup / "cgroup.procs").read_text().split():
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1]) * 1024
    return usage / 2**20, rss / 2**20


def available_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 0


async def fill(api: Api, isolation: str, cap: int) -> Fit:
    """Machines of ``isolation`` one after another until the API refuses one or ``cap``."""
    await asyncio.sleep(2.0)
    used_before, machines_before = await api.ledger()
    for _ in range(100):  # the published row follows the destroys before by a beat
        if machines_before == 0:
            break
        await asyncio.sleep(0.1)
        used_before, machines_before = await api.ledger()
    available_before = available_mb()
    made: list[str] = []
    refused = f"stopped at the cap of {cap}"
    try:
        while len(made) < cap:
            created = await api.create(isolation)
            if created.status_code != 201 and created.status_code != 200:
                refused = f"{created.status_code}: {created.json().get('error', created.text)}"
                break
            made.append(str(created.json()["id"]))
            await first_answer(await api.address(made[-1]), time.perf_counter(), 120.0)
        await asyncio.sleep(3.0)  # idle: what each holds once started and quiet
        held = [held_mb(machine_id) for machine_id in made]
        drop = (available_before - available_mb()) / max(1, len(made))
        used, machines = await api.ledger()
        for _ in range(50):  # the published row follows the worker's by a beat
            if machines - machines_before == len(made):
                break
            await asyncio.sleep(0.1)
            used, machines = await api.ledger()
        ledger = (used - used_before) / max(1, len(made))
        return Fit(len(made), refused, ledger, WORKER_MEMORY_MB - used_before,
                   [c for c, _ in held], [r for _, r in held], drop)
    finally:
        await api.destroy(*made)


def ms(values: list[float]) -> str:
    return (f"{statistics.median(values) * 1000:7.0f} ms (min {min(values) * 1000:.0f}, "
            f"max {max(values) * 1000:.0f})")


def report(sides: dict[str, Side], runs: int, load: str) -> None:
    print(f"start to first HTTP answer, 128 MB machines, {runs} runs each, one warm-up; "
          f"load average {load} before, "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} after")
    for isolation, side in sides.items():
        print(f"  {isolation:9} bodega up, Machines API  {ms(side.starts)}")
        for name, values in side.bare.items():
            ratio = statistics.median(side.starts) / statistics.median(values)
            print(f"  {'':9} {name:25} {ms(values)}   bodega / it {ratio:5.2f}x")
    print("resume (suspend, then POST start) to first HTTP answer, against the cold start:")
    for isolation, side in sides.items():
        if side.resumes:
            ratio = statistics.median(side.starts) / statistics.median(side.resumes)
            print(f"  {isolation:9} resume {ms(side.resumes)}   cold start / resume "
                  f"{ratio:6.1f}x")
    print(f"idle 128 MB machines on one worker of {WORKER_MEMORY_MB} MB:")
    for isolation, side in sides.items():
        fit = side.fit
        if fit is None:
            continue
        cgroup, rss = statistics.median(fit.cgroup_mb), statistics.median(fit.rss_mb)
        by_ledger = int(fit.free_mb // fit.ledger_mb) if fit.ledger_mb else 0
        by_cgroup = int(fit.free_mb // cgroup) if cgroup else 0
        print(f"  {isolation:9} {fit.answered} created and answering ({fit.refused})")
        print(f"  {'':9} ledger {fit.ledger_mb:.0f} MB each, {by_ledger} fit by it; idle, "
              f"each holds (medians) cgroup {cgroup:.1f} MB, RSS {rss:.1f} MB; host "
              f"MemAvailable drop {fit.available_drop_mb:.1f} MB each (noisy)")
        print(f"  {'':9} by its cgroup {by_cgroup} would fit: ledger / cgroup "
              f"{by_ledger / max(1, by_cgroup):.2f}x")

async def main(runs: int, vm_cap: int) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="bodega-isolation-bench-"))
    os.environ["BODEGA_CONFIG"] = str(work / "contexts.toml")  # not the user's contexts
    api_port, registry = free_port(), free_port()
    up = await UpProcess(work / "cluster", "--regions", "ams", "--workers-per-region", "1",
                         # cpus enough that memory, not shared cpus, bounds the fill
                         "--worker-cpus", "16", "--worker-memory-mb", str(WORKER_MEMORY_MB),
                         "--api-port", str(api_port), "--proxy-port", str(free_port()),
                         "--proxy-tls-port", "0", "--registry-port", str(registry),
                         "--machine-cidr", CIDR, "--no-private-network").start()
    sides: dict[str, Side] = {}
    try:
        await up.until_line("bodega is up", timeout=300)
        image = await asyncio.to_thread(build_image, work, f"127.0.0.1:{registry}",
                                        "bench/isolation:v1", cluster=work / "cluster")
        headers = {"authorization": f"Bearer {up.token()}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}",
                                     headers=headers, timeout=120) as http:
            api = Api(http, work / "cluster" / "workers", image)
            (await http.post("/v1/apps", json={"app_name": "bench",
                                               "org_slug": "personal"})).raise_for_status()
            offered = await api.offered()
            bare = Bare(work / "bare")
            for isolation in ISOLATIONS:
                if isolation not in offered:
                    print(f"{isolation}: not offered by the worker ({offered}); skipped")
                    continue
                side = sides[isolation] = Side()
                print(f"{isolation}: starts, resumes, idle fill", file=sys.stderr, flush=True)
                await starts(api, bare, isolation, runs, side)
                await resumes(api, isolation, runs, side)
                side.fit = await fill(api, isolation, vm_cap if isolation == "vm" else 64)
    finally:
        await up.stop()
        await unwire(work / "cluster")
        sweep()
        shutil.rmtree(work, ignore_errors=True)
    report(sides, runs, load)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--vm-cap", type=int, default=4,
                        help="the most vms the idle fill boots (each eats a core under tcg)")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.vm_cap))
