"""Create+start of a process machine until its port accepts, against a bare spawn.

Both sides run the same program (a Python TCP server) and are timed until a
TCP connect to its port succeeds. The worker side goes through a real worker
process: the internal API, the durable state machines, a network namespace
(when root), cgroups and the wrapper. The baseline is ``asyncio`` spawning the
program directly. Prints both medians and the ratio.

    python bench/machine_start.py [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bodega.runtime.keys import internal_token
from bodega.wire.worker_client import WorkerClient
from bodega.worker.network import NetnsNetwork

SECRET = "bench-secret"
SUBNET = "10.254.9.0/24"
SERVER = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen()\n"
    "time.sleep(600)\n"
)


async def until_accepts(host: str, port: int, deadline: float = 30.0) -> None:
    end = time.perf_counter() + deadline
    while True:
        try:
            _reader, writer = await asyncio.open_connection(host, port)
            writer.close()
            return
        except OSError:
            if time.perf_counter() > end:
                raise
            await asyncio.sleep(0.0005)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def bare_spawn(port: int) -> float:
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", SERVER, str(port))
    await until_accepts("127.0.0.1", port)
    elapsed = time.perf_counter() - start
    process.kill()
    await process.wait()
    return elapsed


async def via_worker(client: WorkerClient, port: int) -> float:
    config = {
        "image": "bench/server", "guest": {"cpus": 1, "memory_mb": 256},
        "init": {"exec": [sys.executable, "-c", SERVER, str(port)]},
        "restart": {"policy": "no"},
    }
    start = time.perf_counter()
    machine = await client.create_machine({"app": "bench", "config": config})
    host = machine.get("service_host") or "127.0.0.1"
    await until_accepts(host, port)
    elapsed = time.perf_counter() - start
    await client.destroy(machine["id"], force=True)
    await client.wait(machine["id"], "destroyed", timeout=30)
    return elapsed


async def start_worker(tmp: Path) -> tuple[asyncio.subprocess.Process, str]:
    ready = tmp / "ready.json"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "worker", "--name", "bench", "--region", "ams",
        "--data-dir", str(tmp / "w"), "--listen", "127.0.0.1:0", "--cpus", "2",
        "--memory-mb", "8192", "--machine-subnet", SUBNET, "--ready-file", str(ready),
        "--log-level", "warning",
        env={**os.environ, "BODEGA_CLUSTER_SECRET": SECRET},
    )
    while not ready.exists():
        if process.returncode is not None:
            raise SystemExit("the worker exited while starting")
        await asyncio.sleep(0.02)
    return process, json.loads(ready.read_text())["url"]


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        worker, url = await start_worker(Path(tmp))
        client = WorkerClient(url, internal_token(SECRET), timeout=30)
        try:
            for _ in range(3):  # warm the page cache and the worker's code paths
                await bare_spawn(free_port())
                await via_worker(client, free_port())
            bare, worker_times = [], []
            for _ in range(runs):  # interleaved, so drift affects both alike
                bare.append(await bare_spawn(free_port()))
                worker_times.append(await via_worker(client, free_port()))
        finally:
            await client.aclose()
            worker.terminate()
            await worker.wait()
            if os.geteuid() == 0:
                await NetnsNetwork(ipaddress.ip_network(SUBNET)).teardown()
    b, w = statistics.median(bare), statistics.median(worker_times)
    p90 = statistics.quantiles(worker_times, n=10)[-1]
    mode = "netns + cgroups + unprivileged user" if os.geteuid() == 0 else "host network"
    print(f"machine start ({mode}), {runs} runs each, median until the port accepts:")
    print(f"  bare asyncio spawn        {b * 1000:7.1f} ms")
    print(f"  worker create+start       {w * 1000:7.1f} ms   (p90 {p90 * 1000:.1f} ms)")
    print(f"  added by the worker       {(w - b) * 1000:7.1f} ms")
    print(f"  ratio worker / bare       {w / b:7.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    asyncio.run(main(parser.parse_args().runs))
