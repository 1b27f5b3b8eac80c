"""The proxy against going direct, and a cold start against a bare spawn, in one run.

A worker (process driver: its own namespace and cgroup per machine, when
root) and a proxy, each its own process, joined by gossip. One machine runs
a small keep-alive HTTP server. The same load generator, at the same
concurrency, then sends requests to the machine's address directly and
through the proxy; the ratio is the proxy's cost. Cold start: the machine is
stopped and one request goes through the proxy (which starts it, waits for
its port, forwards); the baseline spawns the same program directly and
sends it the same request once its port accepts.

    python -m bench.proxy [--requests 20000] [--concurrency 32] [--cold 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.loadgen import Connection, run
from bodega.runtime.keys import internal_token
from bodega.wire.worker_client import WorkerClient

SECRET = "bench-proxy-secret"
SUBNET = "10.254.7.0/24"
# A keep-alive HTTP/1.1 server that answers every request with a short body.
APP = r"""
import asyncio, sys
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"
class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""
    def data_received(self, data):
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            _, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            self.transport.write(RESPONSE)
async def main():
    server = await asyncio.get_running_loop().create_server(Echo, "0.0.0.0", int(sys.argv[1]))
    await server.serve_forever()
asyncio.run(main())
"""


async def daemon(tmp: Path, name: str, *args: str) -> tuple[asyncio.subprocess.Process, Any]:
    ready = tmp / f"{name}.json"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", *args, "--name", name, "--data-dir", str(tmp / name),
        "--ready-file", str(ready), "--log-level", "warning",
        env={**os.environ, "BODEGA_CLUSTER_SECRET": SECRET})
    while not ready.exists():
        if process.returncode is not None:
            raise SystemExit(f"{name} exited while starting")
        await asyncio.sleep(0.05)
    return process, json.loads(ready.read_text())


class NotOk(Exception):
    pass


async def first_response(url: str, host: str, timeout: float = 30) -> float:
    """Seconds until one GET through ``url`` is answered (connecting as soon as possible)."""
    began = time.perf_counter()
    deadline = began + timeout
    while True:
        try:
            conn = await Connection.open(url)
            break
        except OSError:
            if time.perf_counter() > deadline:
                raise
            await asyncio.sleep(0.0005)
    status, body = await conn.request("GET", "/", headers={"Host": host})
    conn.close()
    if status != 200:
        raise NotOk(f"{url} answered {status}: {body.decode(errors='replace')}")
    return time.perf_counter() - began


async def bare_cold(port: int) -> float:
    """From spawning the program to its first answer."""
    began = time.perf_counter()
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", APP, str(port))
    await first_response(f"http://127.0.0.1:{port}", "localhost")
    elapsed = time.perf_counter() - began
    process.kill()
    await process.wait()
    return elapsed


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bodega-bench-proxy-") as tmp_name:
        tmp = Path(tmp_name)
        worker, winfo = await daemon(tmp, "bench-w", "worker", "--region", "ams",
                                     "--listen", "127.0.0.1:0", "--cpus", "2",
                                     "--memory-mb", "4096", "--machine-subnet", SUBNET,
                                     "--stop-machines-on-exit")
        proxy, pinfo = await daemon(tmp, "bench-p", "proxy", "--region", "ams",
                                    "--listen", "127.0.0.1:0", "--join", winfo["gossip"],
                                    "--autostop-interval", "3600")
        client = WorkerClient(winfo["url"], internal_token(SECRET), timeout=60)
        try:
            machine = await client.create_machine({"app": "bench", "config": {
                "image": "bench/hello", "init": {"exec": [sys.executable, "-c", APP, "8080"]},
                "guest": {"cpus": 1, "memory_mb": 256}, "restart": {"policy": "no"},
                "services": [{"protocol": "tcp", "internal_port": 8080, "autostart": True,
                              "ports": [{"port": 80, "handlers": ["http"]}],
                              "concurrency": {"soft_limit": 1000}}]}})
            await client.wait(machine["id"], "started")
            direct = f"http://{machine['service_host']}:8080"
            await first_response(direct, "bench.localhost")
            via = pinfo["url"]
            for _ in range(100):  # the proxy hears of the machine through the registry
                try:
                    await first_response(via, "bench.localhost", timeout=1)
                    break
                except (NotOk, OSError):
                    await asyncio.sleep(0.1)
            host = {"Host": "bench.localhost"}

            def get(_n: int) -> tuple[str, str, bytes]:
                return "GET", "/", b""

            for url in (direct, via):  # warm up both paths
                await run(url, get, total=2000, concurrency=args.concurrency, headers=host)
            results = {}
            for name, url in (("direct", direct), ("proxy", via), ("direct again", direct)):
                results[name] = await run(url, get, total=args.requests,
                                          concurrency=args.concurrency, headers=host)
            # Latency without queueing: one client, one request at a time.
            single = {}
            for name, url in (("direct", direct), ("proxy", via)):
                single[name] = await run(url, get, total=args.requests // 10, concurrency=1,
                                         headers=host)
            # Cold starts: stop the machine, then one request through the proxy wakes it.
            cold, bare = [], []
            for _ in range(args.cold):
                await client.stop(machine["id"])
                await client.wait(machine["id"], "stopped")
                await asyncio.sleep(1.0)  # the proxy's view has the machine stopped
                cold.append(await first_response(via, "bench.localhost"))
                bare.append(await bare_cold(_free_port()))
        finally:
            await client.aclose()
            for process in (proxy, worker):
                process.terminate()
                await process.wait()
    d, p = results["direct"], results["proxy"]
    print(f"proxy: one machine, {args.concurrency} keep-alive clients, {args.requests} "
          "requests each way, same load generator")
    for name, result in results.items():
        print(f"  {name:<13} {result.rate:8.0f} req/s   p50 {result.median() * 1000:6.3f} ms   "
              f"p99 {result.percentile(99) * 1000:6.3f} ms")
    again = results["direct again"]
    base_rate = (d.rate + again.rate) / 2
    base_p50 = (d.median() + again.median()) / 2
    print(f"  through the proxy: {p.rate / base_rate:.2f}x the direct throughput, "
          f"+{(p.median() - base_p50) * 1000:.3f} ms at p50 under that load")
    sd, sp = single["direct"], single["proxy"]
    print(f"  one client at a time: direct p50 {sd.median() * 1000:.3f} ms, through the proxy "
          f"p50 {sp.median() * 1000:.3f} ms (+{(sp.median() - sd.median()) * 1000:.3f} ms), "
          f"p99 {sd.percentile(99) * 1000:.3f} / {sp.percentile(99) * 1000:.3f} ms")
    cm, bm = statistics.median(cold), statistics.median(bare)
    print(f"  cold start, first response (median of {args.cold}): through the proxy "
          f"{cm * 1000:.1f} ms, bare spawn-and-request {bm * 1000:.1f} ms, ratio {cm / bm:.2f}x")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--cold", type=int, default=10)
    asyncio.run(main(parser.parse_args()))
