"""The price of mutual TLS on internal links: create+start through the public API.

Two ``bodega up`` clusters run side by side on this host, alike but for one
flag: one with its internal links in mutual TLS (the default), one with
``--internal-tls off`` (plain HTTP, unauthenticated: for this measurement
only). Each run creates a machine through each cluster's public Machines API
and waits until it is started (``POST /v1/apps/bench/machines``, then ``GET
.../wait?state=started``), in alternating order so drift hits both alike,
after three warm-ups each; the machine is then destroyed, untimed. Prints
each median and p90, and their ratio (TLS over plain).

    python -m bench.machines.internal_tls [--runs 40] [--driver process|null]

The broker's calls to workers (reserve, create, wait) are the internal links
on this path; the API itself is plain HTTP in both clusters.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from tests.cidr_kit import machine_cidr
from tests.leftovers_kit import sweep_data_dir
from tests.python_kit import machine_python

PROGRAM = "import time; time.sleep(600)"


def free_port(kind: socket.SocketKind = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Up:
    """One ``bodega up`` in a child process."""

    def __init__(self, data: Path, driver: str, cidr: str, *extra: str) -> None:
        self.data = data
        self.api_port = free_port()
        self.argv = [sys.executable, "-m", "bodega", "up", "--data-dir", str(data),
                     "--regions", "ams", "--workers-per-region", "2", "--worker-cpus", "16",
                     "--worker-memory-mb", "16384", "--driver", driver,
                     "--api-port", str(self.api_port), "--proxy-port", str(free_port()),
                     "--proxy-tls-port", str(free_port()),
                     "--gossip-port", str(free_port(socket.SOCK_DGRAM)),
                     "--registry-port", "0", "--machine-cidr", cidr,
                     "--log-level", "warning", *extra]
        self.process: asyncio.subprocess.Process | None = None
        self.url = f"http://127.0.0.1:{self.api_port}"

    async def start(self) -> None:
        out = (self.data.parent / f"{self.data.name}.out").open("wb")
        self.process = await asyncio.create_subprocess_exec(
            *self.argv, stdout=out, stderr=out, stdin=asyncio.subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        log = self.data.parent / f"{self.data.name}.out"
        while b"bodega is up" not in log.read_bytes():
            if self.process.returncode is not None or time.monotonic() > deadline:
                raise SystemExit(f"bodega up did not come up:\n{log.read_text()[-2000:]}")
            await asyncio.sleep(0.2)

    def token(self) -> str:
        return (self.data / "api-token").read_text().strip()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), 120)
        await sweep_data_dir(self.data)


async def create_and_start(http: aiohttp.ClientSession, url: str,
                           config: dict[str, Any]) -> tuple[float, str]:
    began = time.perf_counter()
    async with http.post(f"{url}/v1/apps/bench/machines", json={"config": config}) as made:
        body = await made.json()
        if made.status != 200:
            raise SystemExit(f"create refused: {body}")
    async with http.get(f"{url}/v1/apps/bench/machines/{body['id']}/wait",
                        params={"state": "started", "timeout": "60"}) as waited:
        if waited.status != 200:
            raise SystemExit(f"never started: {await waited.text()}")
    return time.perf_counter() - began, str(body["id"])


def summary(times: list[float]) -> tuple[float, float]:
    return statistics.median(times), statistics.quantiles(times, n=10)[-1]


async def main(runs: int, driver: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="bodega-bench-tls-"))
    root.chmod(0o755)  # noqa: ASYNC240 (machines run as unprivileged users)
    # Ranges no test or other bench on this host holds (tests/cidr_kit.py's locks).
    clusters = {"mutual TLS": Up(root / "tls", driver, machine_cidr(100, 200)),
                "plain": Up(root / "plain", driver, machine_cidr(100, 200),
                            "--internal-tls", "off")}
    config = {"image": "bench/sleep", "guest": {"cpus": 1, "memory_mb": 256},
              "init": {"exec": [machine_python(), "-c", PROGRAM]}}
    times: dict[str, list[float]] = {name: [] for name in clusters}
    sessions: dict[str, aiohttp.ClientSession] = {}
    try:
        await asyncio.gather(*(up.start() for up in clusters.values()))
        for name, up in clusters.items():
            sessions[name] = aiohttp.ClientSession(
                headers={"authorization": f"Bearer {up.token()}"})
            async with sessions[name].post(f"{up.url}/v1/apps", json={
                    "app_name": "bench", "org_slug": "personal"}) as created:
                created.raise_for_status()
        order = list(clusters)
        for run in range(3 + runs):
            for name in order if run % 2 else reversed(order):
                up = clusters[name]
                elapsed, mid = await create_and_start(sessions[name], up.url, config)
                async with sessions[name].delete(f"{up.url}/v1/apps/bench/machines/{mid}",
                                                 params={"force": "true"}) as gone:
                    gone.raise_for_status()
                if run >= 3:  # the first three warm the pools, caches and code paths
                    times[name].append(elapsed)
    finally:
        for session in sessions.values():
            await session.close()
        await asyncio.gather(*(up.stop() for up in clusters.values()))
        shutil.rmtree(root, ignore_errors=True)
    print(f"create+start through the public API, bodega up, {driver} driver, 2 workers, "
          f"{runs} runs each, interleaved:")
    for name in clusters:
        median, p90 = summary(times[name])
        print(f"  {name:<11} internal links: median {median * 1000:7.1f} ms  "
              f"p90 {p90 * 1000:7.1f} ms")
    tls, plain = (statistics.median(times[name]) for name in clusters)
    print(f"  price of mutual TLS: {tls / plain:.3f}x the plain median "
          f"({(tls - plain) * 1000:+.1f} ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--driver", default="process" if os.geteuid() == 0 else "null",
                        help="process (machines run programs; root) or null (no processes)")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.runs, arguments.driver))
