"""`bodega up`'s TLS edge against nginx ending TLS with the same certificate, and TCP pass-through.

`bodega up` as a user runs it (``bench/rigs/up_cluster.py``), its proxy's TLS port serving
its default certificate (the cluster CA's ``*.localhost``); one machine runs the
keep-alive HTTP server of ``bench.proxy.http`` and another a TCP echo behind a
``[[services]]`` port with no handlers. nginx (one worker process) ends TLS
with the same key and certificate and proxies to the same machine (keep-alive
upstream). In one run, interleaved in rounds:

- ``wrk`` over HTTPS with keep-alive (requests/s, latency), both ways;
- ``wrk`` with ``Connection: close``: every request a new TCP connection and
  a TLS 1.3 handshake (wrk resumes its session by ticket, as browsers do):
  new connections/s;
- ``openssl s_time -new``: full handshakes (ECDHE, the P-256 certificate
  signed for each), one at a time with no request: handshakes/s;
- a TCP echo: one connection streaming ``--megabytes`` both ways, through
  the proxy's TCP port and directly to the machine (MB/s).

    python -m bench.proxy.edge [--duration 10] [--rounds 5] [--connections 32] [--megabytes 256]

Needs ``wrk``, ``nginx`` and ``haproxy``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.ports_kit import free_port
from tests.python_kit import machine_python

from bench.proxy.http import APP, HOST, WrkResult, combined, nginx, wrk
from bench.rigs.up_cluster import UpCluster

ECHO = r"""
import asyncio, sys
async def echo(reader, writer):
    while data := await reader.read(262144):
        writer.write(data)
        await writer.drain()
    writer.close()
async def main():
    server = await asyncio.start_server(echo, "0.0.0.0", int(sys.argv[1]))
    await server.serve_forever()
asyncio.run(main())
"""

NGINX_TLS = """
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    upstream machine {{ server {upstream}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {cert};
        ssl_protocols TLSv1.2 TLSv1.3;
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


async def new_connections(url: str, seconds: float) -> WrkResult:
    """wrk with every request on a new connection (its session resumed): connections/s."""
    process = await asyncio.create_subprocess_exec(
        "wrk", "-t1", "-c16", f"-d{max(1, round(seconds))}s", "-H", "Connection: close",
        "-H", f"Host: {HOST}", url + "/", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out = (await process.communicate())[0].decode()
    rate = [line for line in out.splitlines() if line.startswith("Requests/sec:")]
    if process.returncode != 0 or not rate:
        raise SystemExit(f"wrk (new connections) against {url} failed:\n{out}")
    return WrkResult(float(rate[0].split()[1]), float("nan"), float("nan"), "")


async def full_handshakes(url: str, seconds: float) -> float:
    """Full TLS handshakes per second, one after another, none resumed (``openssl s_time``)."""
    where = url.removeprefix("https://")
    process = await asyncio.create_subprocess_exec(
        "openssl", "s_time", "-connect", where, "-new", "-time", str(max(1, round(seconds))),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out = (await process.communicate())[0].decode()
    found = re.search(r"(\d+) connections in (\d+) real seconds", out)
    if process.returncode != 0 or found is None:
        raise SystemExit(f"openssl s_time against {url} failed:\n{out}")
    return int(found.group(1)) / int(found.group(2))


async def echo_rate(port: int, megabytes: int, host: str = "127.0.0.1") -> float:
    """MB/s of one connection streaming ``megabytes`` out and the same back."""
    reader, writer = await asyncio.open_connection(host, port)
    block, total = b"x" * 262144, megabytes * 1024 * 1024
    began = time.perf_counter()

    async def send() -> None:
        for _ in range(total // len(block)):
            writer.write(block)
            await writer.drain()
        writer.write_eof()

    async def receive() -> None:
        got = 0
        while got < total:
            data = await reader.read(1 << 20)
            if not data:
                raise SystemExit(f"the echo on {port} ended after {got} bytes")
            got += len(data)

    await asyncio.gather(send(), receive())
    writer.close()
    return megabytes / (time.perf_counter() - began)


async def until_answers(url: str) -> None:
    """curl (-k: the bench's own CA) until ``url`` answers 200 for the bench app."""
    for _ in range(200):
        process = await asyncio.create_subprocess_exec(
            "curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "-H",
            f"Host: {HOST}", url + "/", stdout=asyncio.subprocess.PIPE)
        if (await process.communicate())[0] == b"200":
            return
        await asyncio.sleep(0.1)
    raise SystemExit(f"{url} never answered")


def web_config() -> dict[str, Any]:
    return {"image": "bench/hello", "init": {"exec": [machine_python(), "-c", APP, "8080"]},
            "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256},
            "restart": {"policy": "no"},
            "services": [{"protocol": "tcp", "internal_port": 8080, "autostop": "off",
                          "ports": [{"port": 80, "handlers": ["http"]},
                                    {"port": 443, "handlers": ["tls", "http"]}],
                          "concurrency": {"soft_limit": 1000}}]}


def echo_config(port: int) -> dict[str, Any]:
    return {"image": "bench/echo", "init": {"exec": [machine_python(), "-c", ECHO, "9000"]},
            "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256},
            "restart": {"policy": "no"},
            "services": [{"protocol": "tcp", "internal_port": 9000, "autostop": "off",
                          "ports": [{"port": port}]}]}


async def main(args: argparse.Namespace) -> None:
    for tool in ("wrk", "nginx", "haproxy", "openssl", "curl"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench.proxy.edge needs {tool}: apt-get install -y wrk nginx-light "
                             "haproxy openssl curl")
    with tempfile.TemporaryDirectory(prefix="bodega-bench-edge-") as tmp_name:
        tmp = Path(tmp_name)
        tcp_port = free_port()
        async with UpCluster(tmp) as cluster:
            await cluster.app("bench")
            await cluster.app("echo")
            web = await cluster.machine("bench", web_config())
            echo = await cluster.machine("echo", echo_config(tcp_port))
            cert = tmp / "default.pem"  # the edge's, readable by nginx
            cert.write_bytes(cluster.default_certificate.read_bytes())
            cert.chmod(0o644)
            nginx_port = free_port()
            conf = NGINX_TLS.format(tmp=tmp, upstream=f"{web.address}:8080", port=nginx_port,
                                    cert=cert)
            async with nginx(tmp, conf):
                paths = {"nginx": f"https://127.0.0.1:{nginx_port}", "bodega": cluster.tls_url}
                for url in paths.values():
                    await until_answers(url)
                    await wrk(url, args.connections, 1)  # warm up
                for _ in range(200):  # the TCP listener follows the registry
                    try:
                        await echo_rate(tcp_port, 1)
                        break
                    except (OSError, SystemExit):
                        await asyncio.sleep(0.1)
                kept: dict[str, list[WrkResult]] = {name: [] for name in paths}
                fresh: dict[str, list[WrkResult]] = {name: [] for name in paths}
                full: dict[str, list[float]] = {name: [] for name in paths}
                tcp: dict[str, list[float]] = {"direct": [], "bodega": []}
                for _ in range(args.rounds):
                    for name, url in paths.items():
                        kept[name].append(await wrk(url, args.connections,
                                                    args.duration / args.rounds))
                    for name, url in paths.items():
                        fresh[name].append(await new_connections(url,
                                                                 args.duration / args.rounds))
                    for name, url in paths.items():
                        full[name].append(await full_handshakes(url,
                                                                args.duration / args.rounds))
                    tcp["direct"].append(await echo_rate(9000, args.megabytes, echo.address))
                    tcp["bodega"].append(await echo_rate(tcp_port, args.megabytes))
            plane = cluster.plane
    report(args, {n: combined(r) for n, r in kept.items()},
           {n: combined(r) for n, r in fresh.items()},
           {n: statistics.fmean(r) for n, r in full.items()}, tcp, plane)


def report(args: argparse.Namespace, kept: dict[str, WrkResult], fresh: dict[str, WrkResult],
           full: dict[str, float], tcp: dict[str, list[float]], plane: str) -> None:
    print(f"edge: bodega up; wrk, one thread, {args.connections} keep-alive connections over "
          f"HTTPS, {args.duration:g} s each in {args.rounds} interleaved rounds")
    print(f"  {plane.strip()}")
    for name, r in kept.items():
        print(f"  {name:<7} {r.rate:9.0f} req/s   p50 {r.p50:7.3f} ms   p99 {r.p99:7.3f} ms"
              f"   {r.errors}")
    print(f"  bodega/nginx {kept['bodega'].rate / kept['nginx'].rate:.2f}x")
    print("  new TLS connections, resumed (Connection: close, 16 at a time): " + ", ".join(
        f"{name} {r.rate:.0f}/s" for name, r in fresh.items())
        + f"; bodega/nginx {fresh['bodega'].rate / fresh['nginx'].rate:.2f}x")
    print("  full TLS handshakes (openssl s_time -new, one at a time): " + ", ".join(
        f"{name} {rate:.0f}/s" for name, rate in full.items())
        + f"; bodega/nginx {full['bodega'] / full['nginx']:.2f}x")
    median = {name: statistics.median(rates) for name, rates in tcp.items()}
    print(f"  TCP echo, one connection, {args.megabytes} MB each way (median of "
          f"{len(tcp['direct'])}): direct {median['direct']:.0f} MB/s, through bodega's proxy "
          f"{median['bodega']:.0f} MB/s ({median['bodega'] / median['direct']:.2f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--megabytes", type=int, default=256)
    asyncio.run(main(parser.parse_args()))
