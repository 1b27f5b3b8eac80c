"""The placement bench's first line: creates through the public API of a real ``bodega up``.

One region of ``--workers-per-region`` null-driver workers, each its own process as
``bodega up`` runs it (their SQLite commits fsynced, the registry gossiping every
create, the proxy subscribed to it, the image registry beside them), in its own data
dir, on free ports and a machine range no test holds. The same generator as the rig
measures ``GET /v1/health`` (the ceiling) and ``POST /v1/apps/bench/machines``; the
CPU each component spent during the creates is read from ``/proc`` by its pid in
``cluster.json``, summed per role.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port
from tests.leftovers_kit import sweep_data_dir

from bench.loadgen import Result, body, run
from bench.start_stages import cpu_seconds

# Machine ranges no test or other bench holds (tests/cidr_kit.py): 10.232-239.0.0/16.
OCTETS = (232, 240)


@dataclass(frozen=True)
class Measured:
    """One run's figures: the ceiling, the creates, CPU seconds per role, the loads."""

    ceiling: Result
    creates: Result
    cpu: dict[str, float]
    generator: float
    loads: tuple[str, str]
    idle: dict[str, float] | None = None  # cores each role used while nothing was asked


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def roles(cluster: Path) -> dict[str, list[int]]:
    """Each role's pids in ``cluster.json`` (broker, worker, registry, proxy, ...)."""
    found: dict[str, list[int]] = {}
    for part in json.loads((cluster / "cluster.json").read_text())["components"]:
        if part.get("pid"):
            found.setdefault(str(part["role"]), []).append(int(part["pid"]))
    return found


def cpu_by_role(cluster: Path) -> dict[str, float]:
    return {role: sum(cpu_seconds(pid) for pid in pids) for role, pids in roles(cluster).items()}


def start_spies(cluster: Path, out: Path, seconds: int) -> list[subprocess.Popen[bytes]]:
    """py-spy on the broker and on one worker for ``seconds`` (raw collapsed stacks)."""
    out.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    pids = roles(cluster)
    chosen = {"broker": pids["broker"][0], "worker": pids["worker"][0]}
    return [subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--rate", "200", "--duration", str(seconds),
         "--format", "raw", "--output", str(out / f"{role}.txt")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for role, pid in chosen.items()]


async def idle_cores(cluster: Path, seconds: float) -> dict[str, float]:
    """Cores each role uses over ``seconds`` with nothing asked of the cluster, after 10 s
    of rest (the workers' first publications and syncs settle)."""
    await asyncio.sleep(10)
    before, began = cpu_by_role(cluster), time.monotonic()
    await asyncio.sleep(seconds)
    after, spent = cpu_by_role(cluster), time.monotonic() - began
    return {role: (after[role] - before.get(role, 0.0)) / spent for role in after}


async def on_up(workers: int, creates: int, concurrency: int, cpus: int, memory_mb: int,
                profile: Path | None = None, idle: float = 0.0) -> Measured:
    """Start ``bodega up``, create ``creates`` machines through its API, stop it.

    ``idle``: first measure, for that many seconds, what the cluster uses doing nothing."""
    with tempfile.TemporaryDirectory(prefix="bodega-placement-") as name:
        tmp = Path(name)
        os.environ["BODEGA_CONFIG"] = str(tmp / "contexts.toml")  # not the user's contexts
        cluster = tmp / "cluster"
        up = UpProcess(
            cluster, "--regions", "ams", "--workers-per-region", str(workers),
            "--driver", "null", "--worker-cpus", str(cpus),
            "--worker-memory-mb", str(memory_mb),
            "--api-port", str(free_port()), "--proxy-port", str(free_port()),
            "--proxy-tls-port", str(free_port()),
            "--machine-cidr", machine_cidr(*OCTETS), "--log-level", "warning")
        await up.start()
        spies: list[subprocess.Popen[bytes]] = []
        try:
            await up.until_line("bodega is up", timeout=600)
            resting = await idle_cores(cluster, idle) if idle > 0 else None
            url = up.state()["api_url"]
            auth = {"Authorization": f"Bearer {up.token()}"}
            await run(url, lambda n: ("POST", "/v1/apps", body(
                {"app_name": "bench", "org_slug": "personal"})), total=1, concurrency=1,
                headers=auth)
            create = body({"config": {"image": "bench:1", "guest": {
                "cpu_kind": "shared", "cpus": 1, "memory_mb": 256}}, "skip_launch": True})
            make_create: Callable[[int], tuple[str, str, bytes]] = \
                lambda n: ("POST", "/v1/apps/bench/machines", create)  # noqa: E731

            await run(url, lambda n: ("GET", "/v1/health", b""), total=500,
                      concurrency=concurrency, headers=auth)
            await run(url, make_create, total=200, concurrency=concurrency, headers=auth)
            ceiling = await run(url, lambda n: ("GET", "/v1/health", b""), total=creates,
                                concurrency=concurrency, headers=auth)
            first = load()
            before = cpu_by_role(cluster)
            if profile is not None:
                spies = start_spies(cluster, profile, 12)
            own = time.process_time()
            made = await run(url, make_create, total=creates, concurrency=concurrency,
                             headers=auth)
            generator = time.process_time() - own
            after = cpu_by_role(cluster)
            used = {role: after[role] - before.get(role, 0.0) for role in after}
            return Measured(ceiling, made, used, generator, (first, load()), resting)
        finally:
            for spy in spies:
                if spy.poll() is None:
                    spy.send_signal(signal.SIGINT)
                spy.wait(60)
            await up.end()
            await sweep_data_dir(cluster)
