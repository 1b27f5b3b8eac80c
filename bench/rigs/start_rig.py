"""The machine-start rig: a worker process and a broker that knows it from a static catalog.

No registry, no proxy, no image registry beside them: what ``bench/machines/start.py``
measured before it measured ``bodega up``. Kept as its second line, to tell what the
cluster around a create costs from what the create itself does.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tests.tls_kit import TEST_CA, daemon_env

from bodega.wire.internal.worker_client import WorkerClient

SUBNET = "10.254.9.0/24"
HERE = Path(__file__).resolve().parent


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


async def start_broker(tmp: Path, worker: WorkerClient,
                       token: str) -> tuple[asyncio.subprocess.Process, str]:
    """A real broker process that knows the worker from a static catalog (no registry)."""
    capacity = await worker.capacity()
    catalog = tmp / "workers.json"
    catalog.write_text(json.dumps([{
        "name": "bench", "region": "ams", "url": worker.base_url,
        "totals": capacity.totals.model_dump(), "used": capacity.used.model_dump(),
        "cordoned": False}]))
    out = tmp / "broker.json"
    tls = TEST_CA.issue(tmp / "broker-tls", "broker", "bench-broker")
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / "fleet.py"), "broker", "--workers", str(catalog),
        "--token", token, "--out", str(out), "--tls-dir", str(tls),
        env={**os.environ, "PYTHONPATH": str(HERE.parents[1])})
    return process, (await until_file(out, process, "broker"))["url"]
