"""Plain HTTP through `bodega up`'s proxy, against nginx and against going direct.

`bodega up` as a user runs it (``bench/rigs/up_cluster.py``: one region, one worker, the
process driver; the proxy's data plane HAProxy when it is installed, as `bodega up`
chooses). One process machine runs a small keep-alive HTTP server behind an ``http``
service. nginx (one worker process, a keep-alive upstream) proxies to the same machine at
the address the registry has for it. ``wrk`` (one thread, the same keep-alive connections)
drives, in one run, in interleaved rounds: the machine directly, nginx, and the proxy's
public port (``Host: bench.localhost``). Ratios within the run are what count on a shared
machine. One client at a time gives the latency each adds. A stopped machine started by a
request (scale from zero) is ``bench/proxy/cold_start.py``'s.

    python -m bench.proxy.http [--duration 10] [--rounds 5] [--connections 32]

Needs ``wrk``, ``nginx`` and ``haproxy`` (Debian: wrk, nginx-light, haproxy).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.ports_kit import free_port
from tests.python_kit import machine_python

from bench.rigs.loadgen import Connection
from bench.rigs.up_cluster import UpCluster

HOST = "bench.localhost"
# A keep-alive HTTP/1.1 server that answers every request with a short body. Given a second
# argument, it appends to that file when its first statement ran and when its port listened
# (epoch seconds): bench/proxy/cold_start.py's marks.
APP = r"""
import time
began = time.time()
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
    if len(sys.argv) > 2:
        with open(sys.argv[2], "a") as marks:
            marks.write(f"{began} {time.time()}\n")
    await server.serve_forever()
asyncio.run(main())
"""


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


NGINX = """
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    upstream machine {{ server {upstream}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://machine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }}
    }}
}}
"""


@dataclass(frozen=True)
class WrkResult:
    rate: float
    p50: float  # milliseconds
    p99: float
    errors: str


async def wrk(url: str, connections: int, seconds: float) -> WrkResult:
    process = await asyncio.create_subprocess_exec(
        "wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency",
        "-H", f"Host: {HOST}", url + "/", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out = (await process.communicate())[0].decode()
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if process.returncode != 0 or rate is None:
        raise SystemExit(f"wrk against {url} failed:\n{out}")
    errors = re.search(r"Socket errors:.*|Non-2xx or 3xx responses:.*", out)
    return WrkResult(float(rate.group(1)), _percentile(out, "50"), _percentile(out, "99"),
                     errors.group(0) if errors else "")


def combined(results: list[WrkResult]) -> WrkResult:
    """Slices of equal length: the mean rate, the median of each percentile."""
    return WrkResult(statistics.fmean(r.rate for r in results),
                     statistics.median(r.p50 for r in results),
                     statistics.median(r.p99 for r in results),
                     "; ".join(r.errors for r in results if r.errors))


def _percentile(out: str, which: str) -> float:
    found = re.search(rf"^\s+{which}%\s+([\d.]+)(us|ms|s)\s*$", out, re.MULTILINE)
    if found is None:
        return float("nan")
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[found.group(2)]
    return float(found.group(1)) * scale


@contextlib.asynccontextmanager
async def nginx(tmp: Path, conf: str) -> AsyncIterator[None]:
    """nginx running on ``conf`` (its text, written to ``tmp``) while the block runs."""
    path = tmp / "nginx.conf"
    path.write_text(conf)
    process = await asyncio.create_subprocess_exec(
        "nginx", "-p", str(tmp), "-c", str(path), "-g", "daemon off;")
    try:
        yield
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


def machine_config() -> dict[str, Any]:
    return {"image": "bench/hello", "init": {"exec": [machine_python(), "-c", APP, "8080"]},
            "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256},
            "restart": {"policy": "no"},
            "services": [{"protocol": "tcp", "internal_port": 8080, "autostop": "off",
                          "ports": [{"port": 80, "handlers": ["http"]}],
                          "concurrency": {"soft_limit": 1000}}]}


async def until_routed(url: str) -> None:
    for _ in range(200):  # the proxy hears of the machine through the registry
        try:
            await first_response(url, HOST, timeout=1)
            return
        except (NotOk, OSError):
            await asyncio.sleep(0.1)
    raise SystemExit(f"{url} never routed to the machine")


async def main(args: argparse.Namespace) -> None:
    for tool in ("wrk", "nginx", "haproxy"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench.proxy.http needs {tool}: apt-get install -y wrk nginx-light "
                             "haproxy")
    with tempfile.TemporaryDirectory(prefix="bodega-bench-proxy-") as tmp_name:
        tmp = Path(tmp_name)
        port = free_port()
        async with UpCluster(tmp) as cluster:
            await cluster.app("bench")
            machine = await cluster.machine("bench", machine_config())
            upstream = f"{machine.address}:8080"
            async with nginx(tmp, NGINX.format(tmp=tmp, upstream=upstream, port=port)):
                paths = {"direct": f"http://{upstream}", "nginx": f"http://127.0.0.1:{port}",
                         "bodega": cluster.proxy_url}
                for url in paths.values():
                    await until_routed(url)
                    await wrk(url, args.connections, 1)  # warm up
                # In rounds, each path a slice per round: load from elsewhere on a shared
                # machine then falls on every path alike instead of on whichever ran then.
                slices: dict[str, list[WrkResult]] = {name: [] for name in paths}
                ones: dict[str, list[WrkResult]] = {name: [] for name in paths}
                for _ in range(args.rounds):
                    for name, url in paths.items():
                        slices[name].append(await wrk(url, args.connections,
                                                      args.duration / args.rounds))
                    for name, url in paths.items():
                        ones[name].append(await wrk(url, 1, args.duration / args.rounds / 2))
            plane = cluster.plane
    report(args, {name: combined(results) for name, results in slices.items()},
           {name: combined(results) for name, results in ones.items()}, plane)


def report(args: argparse.Namespace, loaded: dict[str, WrkResult],
           single: dict[str, WrkResult], plane: str) -> None:
    print(f"proxy: bodega up, one machine; wrk, one thread, {args.connections} keep-alive "
          f"connections, {args.duration:g} s each in {args.rounds} interleaved rounds")
    print(f"  {plane.strip()}")
    for name, r in loaded.items():
        print(f"  {name:<7} {r.rate:9.0f} req/s   p50 {r.p50:7.3f} ms   p99 {r.p99:7.3f} ms"
              f"   {r.errors}")
    d, n, b = loaded["direct"], loaded["nginx"], loaded["bodega"]
    print(f"  bodega/nginx {b.rate / n.rate:.2f}x; nginx/direct {n.rate / d.rate:.2f}x; "
          f"bodega/direct {b.rate / d.rate:.2f}x")
    base = single["direct"].p50
    print("  one client: p50 (p99) " + ", ".join(
        f"{name} {r.p50:.3f} ({r.p99:.3f}) ms" for name, r in single.items()))
    print("  added p50 for one client: " + ", ".join(
        f"{name} {r.p50 - base:+.3f} ms" for name, r in single.items() if name != "direct"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
