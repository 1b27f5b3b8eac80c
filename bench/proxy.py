"""The proxy against going direct and against nginx, and a cold start against a bare spawn.

A worker (process driver: its own namespace and cgroup per machine, when
root) and bodega's proxy, each its own process, joined by gossip; one
machine runs a small keep-alive HTTP server. ``wrk`` (one thread, the same
keep-alive connections) then drives, in one run: the machine's address
directly; nginx as a reverse proxy to it (one worker process, a keep-alive
upstream); bodega's proxy with HAProxy as its data plane; and bodega's proxy
on its pure-Python data plane. Ratios within the run are what count on a
shared machine. One client at a time gives the latency a proxy adds. Cold
start: the machine is stopped and one request goes through bodega's proxy
(which starts it, waits for its port, forwards); the baseline spawns the
same program directly and sends it the same request once its port accepts.

    python -m bench.proxy [--duration 10] [--rounds 5] [--connections 32] [--cold 10]

Needs ``wrk``, ``nginx`` and ``haproxy`` (Debian: wrk, nginx-light, haproxy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.leftovers_kit import sweep_data_dir
from tests.python_kit import machine_python
from tests.tls_kit import TEST_CA, daemon_env

from bench.loadgen import Connection
from bodega.wire.worker_client import WorkerClient

SUBNET = "10.254.7.0/24"
# A keep-alive HTTP/1.1 server that answers every request with a short body. Given a second
# argument, it appends to that file when its first statement ran and when its port listened
# (epoch seconds): bench/cold_start.py's marks.
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


async def daemon(tmp: Path, name: str, *args: str) -> tuple[asyncio.subprocess.Process, Any]:
    ready = tmp / f"{name}.json"
    TEST_CA.issue(tmp / name / "tls", args[0], name)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", *args, "--name", name, "--data-dir", str(tmp / name),
        "--ready-file", str(ready), "--log-level", "warning",
        env={**os.environ, **daemon_env()})
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
    process = await asyncio.create_subprocess_exec(machine_python(), "-c", APP, str(port))
    await first_response(f"http://127.0.0.1:{port}", "localhost")
    elapsed = time.perf_counter() - began
    process.kill()
    await process.wait()
    return elapsed


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
        "-H", "Host: bench.localhost", url + "/", stdout=asyncio.subprocess.PIPE,
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


async def start_nginx(tmp: Path, upstream: str) -> tuple[asyncio.subprocess.Process, str]:
    port = _free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX.format(tmp=tmp, upstream=upstream, port=port))
    process = await asyncio.create_subprocess_exec(
        "nginx", "-p", str(tmp), "-c", str(conf), "-g", "daemon off;")
    url = f"http://127.0.0.1:{port}"
    await first_response(url, "bench.localhost")
    return process, url


async def until_routed(url: str) -> None:
    for _ in range(200):  # the proxy hears of the machine through the registry
        try:
            await first_response(url, "bench.localhost", timeout=1)
            return
        except (NotOk, OSError):
            await asyncio.sleep(0.1)
    raise SystemExit(f"{url} never routed to the machine")


async def main(args: argparse.Namespace) -> None:
    for tool in ("wrk", "nginx", "haproxy"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench.proxy needs {tool}: apt-get install -y wrk nginx-light "
                             "haproxy")
    with tempfile.TemporaryDirectory(prefix="bodega-bench-proxy-") as tmp_name:
        tmp = Path(tmp_name)
        worker, winfo = await daemon(tmp, "bench-w", "worker", "--region", "ams",
                                     "--listen", "127.0.0.1:0", "--cpus", "2",
                                     "--memory-mb", "4096", "--machine-subnet", SUBNET,
                                     "--stop-machines-on-exit")
        haproxy, hinfo = await daemon(tmp, "bench-p", "proxy", "--region", "ams",
                                      "--listen", "127.0.0.1:0", "--join", winfo["gossip"],
                                      "--autostop-interval", "3600", "--data-plane", "haproxy")
        python, pyinfo = await daemon(tmp, "bench-py", "proxy", "--region", "ams",
                                      "--listen", "127.0.0.1:0", "--join", winfo["gossip"],
                                      "--autostop-interval", "3600", "--data-plane", "python")
        processes = [python, haproxy, worker]
        client = WorkerClient(winfo["url"], TEST_CA.context("broker"), timeout=60)
        try:
            machine = await client.create_machine({"app": "bench", "config": {
                "image": "bench/hello", "init": {"exec": [machine_python(), "-c", APP, "8080"]},
                "guest": {"cpus": 1, "memory_mb": 256}, "restart": {"policy": "no"},
                "services": [{"protocol": "tcp", "internal_port": 8080, "autostart": True,
                              "ports": [{"port": 80, "handlers": ["http"]}],
                              "concurrency": {"soft_limit": 1000}}]}})
            await client.wait(machine.id, "started")
            upstream = f"{machine.service_host}:8080"
            direct = f"http://{upstream}"
            await first_response(direct, "bench.localhost")
            nginx, nginx_url = await start_nginx(tmp, upstream)
            processes.insert(0, nginx)
            paths = {"direct": direct, "nginx": nginx_url, "bodega (haproxy)": hinfo["url"],
                     "bodega (python)": pyinfo["url"]}
            for url in paths.values():
                await until_routed(url)
                await wrk(url, args.connections, 1)  # warm up
            # In rounds, each path a slice per round: load from elsewhere on a shared
            # machine then falls on every path alike instead of on whichever ran at the time.
            slices: dict[str, list[WrkResult]] = {name: [] for name in paths}
            ones: dict[str, list[WrkResult]] = {name: [] for name in paths}
            for _ in range(args.rounds):
                for name, url in paths.items():
                    slices[name].append(await wrk(url, args.connections,
                                                  args.duration / args.rounds))
                for name, url in paths.items():
                    ones[name].append(await wrk(url, 1, args.duration / args.rounds / 2))
            loaded = {name: combined(results) for name, results in slices.items()}
            single = {name: combined(results) for name, results in ones.items()}
            cold: dict[str, list[float]] = {"bodega (haproxy)": [], "bodega (python)": [],
                                            "bare": []}
            for _ in range(args.cold):
                for name in ("bodega (haproxy)", "bodega (python)"):
                    await client.stop(machine.id)
                    await client.wait(machine.id, "stopped")
                    await asyncio.sleep(1.5)  # the proxy's view (and HAProxy) have it stopped
                    cold[name].append(await first_response(paths[name], "bench.localhost"))
                cold["bare"].append(await bare_cold(_free_port()))
        finally:
            await client.aclose()
            for process in processes:
                if process.returncode is None:
                    process.terminate()
                    await process.wait()
            await sweep_data_dir(tmp / "bench-w")  # what a stop cut short left
    report(args, loaded, single, cold)


def report(args: argparse.Namespace, loaded: dict[str, WrkResult],
           single: dict[str, WrkResult], cold: dict[str, list[float]]) -> None:
    print(f"proxy: one machine; wrk, one thread, {args.connections} keep-alive connections, "
          f"{args.duration:g} s each in {args.rounds} interleaved rounds")
    for name, r in loaded.items():
        print(f"  {name:<17} {r.rate:9.0f} req/s   p50 {r.p50:7.3f} ms   p99 {r.p99:7.3f} ms"
              f"   {r.errors}")
    d, n, b = loaded["direct"], loaded["nginx"], loaded["bodega (haproxy)"]
    print(f"  bodega/nginx {b.rate / n.rate:.2f}x; nginx/direct {n.rate / d.rate:.2f}x; "
          f"bodega/direct {b.rate / d.rate:.2f}x; bodega python/nginx "
          f"{loaded['bodega (python)'].rate / n.rate:.2f}x")
    base = single["direct"].p50
    print("  one client: p50 (p99) " + ", ".join(
        f"{name} {r.p50:.3f} ({r.p99:.3f}) ms" for name, r in single.items()))
    print("  added p50 for one client: " + ", ".join(
        f"{name} +{r.p50 - base:.3f} ms" for name, r in single.items() if name != "direct"))
    median = {name: statistics.median(times) for name, times in cold.items()}
    print(f"  cold start, first response (median of {len(cold['bare'])}): " + ", ".join(
        f"{name} {m * 1000:.1f} ms ({m / median['bare']:.2f}x)" for name, m in median.items()
        if name != "bare") + f"; bare spawn-and-request {median['bare'] * 1000:.1f} ms")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cold", type=int, default=10)
    asyncio.run(main(parser.parse_args()))
