"""The autoscaler under a stepped load, on ``bodega up``: how fast it follows, what it fails.

``bodega up`` as a user runs it (one region, two workers, ``--driver process``, the
metrics store scraping every second). One app's machine runs an HTTP server whose every
request takes ``--work`` seconds (0.1 s: about 10 req/s per session); the app is
autoscaled ``--min 1 --max 4 --concurrency 3``, scaling in 10 s after the load drops.
An open-loop client (a task per request, sent at a fixed rate whatever the answers do)
sends, through the proxy's public port:

1. ``--low`` req/s (10) for 15 s: the minimum serves it;
2. ``--high`` req/s (100: about 10 sessions, 4 machines wanted) until the app has 4
   started machines and 20 s more;
3. ``--low`` req/s again until it is back to 1 started machine, and 5 s more.

Prints, per phase, requests sent, failed (an answer other than 200, or none in 30 s),
p50 and p99 latency; the seconds from the step up until 4 machines run, and from the
step down until 1 does; and what the autoscaler said it did.

    python -m bench.proxy.autoscale [--high 100] [--low 10] [--work 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port
from tests.leftovers_kit import sweep_data_dir
from tests.python_kit import machine_python

APP = "stepped"
MAX = 4
SERVER = """
import http.server, sys, time
work = float(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.path != "/fast":
            time.sleep(work)
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args): pass
class S(http.server.ThreadingHTTPServer):
    request_queue_size = 128  # a burst's connects queue, none dropped (the default is 5)
S(("0.0.0.0", 8080), H).serve_forever()
"""


def config(work: float) -> dict[str, Any]:
    return {"image": "bench/stepped",
            "init": {"exec": [machine_python(), "-c", SERVER, str(work)]},
            "guest": {"cpus": 1, "memory_mb": 128},
            "services": [{"protocol": "tcp", "internal_port": 8080, "autostart": False,
                          "autostop": "off", "ports": [{"port": 80, "handlers": ["http"]}]}]}


@dataclass
class Phase:
    name: str
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    sent: int = 0

    def line(self) -> str:
        lat = sorted(self.latencies) or [0.0]
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        kinds = ", ".join(f"{n} {k}" for k, n in Counter(self.failures).most_common())
        return (f"{self.name:<10} sent {self.sent:>6}  failed {len(self.failures):>4}  "
                f"p50 {statistics.median(lat) * 1000:7.1f} ms  p99 {p99 * 1000:7.1f} ms"
                + (f"  ({kinds})" if kinds else ""))


class Load:
    """An open loop: ``rate`` requests a second, each in its own task."""

    def __init__(self, web: httpx.AsyncClient) -> None:
        self.web = web
        self.tasks: set[asyncio.Task[None]] = set()

    async def one(self, phase: Phase) -> None:
        began = time.monotonic()
        try:
            answer = await self.web.get("/")
            if answer.status_code != 200:
                phase.failures.append(f"{answer.status_code} {answer.text[:60]!r}")
            else:
                phase.latencies.append(time.monotonic() - began)
        except httpx.HTTPError as exc:
            phase.failures.append(type(exc).__name__)

    async def run(self, phase: Phase, rate: float, until: asyncio.Event) -> None:
        gap, next_at = 1.0 / rate, time.monotonic()
        while not until.is_set():
            task = asyncio.create_task(self.one(phase))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            phase.sent += 1
            next_at += gap
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def drain(self) -> None:
        await asyncio.gather(*self.tasks)


async def started(api: httpx.AsyncClient) -> int:
    listed = (await api.get(f"/v1/apps/{APP}/machines")).json()
    return sum(1 for m in listed if m["state"] == "started")


async def wait_count(api: httpx.AsyncClient, n: int, timeout: float) -> float:
    began = time.monotonic()
    while await started(api) != n:
        if time.monotonic() - began > timeout:
            raise SystemExit(f"{n} started machines not reached in {timeout:g} s")
        await asyncio.sleep(0.5)
    return time.monotonic() - began


async def main(high: float, low: float, work: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bodega-autoscale-") as name:
        tmp = Path(name)
        os.environ["BODEGA_CONFIG"] = str(tmp / "contexts.toml")
        proxy_port = free_port()
        up = await UpProcess(
            tmp / "cluster", "--regions", "ams", "--workers-per-region", "2",
            "--driver", "process", "--api-port", str(free_port()),
            "--proxy-port", str(proxy_port), "--proxy-tls-port", str(free_port()),
            "--registry-port", str(free_port()), "--metrics-interval", "1s",
            "--machine-cidr", machine_cidr(200, 232)).start()
        try:
            await up.until_line("bodega is up")
            headers = {"authorization": f"Bearer {up.token()}"}
            async with httpx.AsyncClient(base_url=up.state()["api_url"], headers=headers,
                                         timeout=60) as api, \
                    httpx.AsyncClient(base_url=f"http://127.0.0.1:{proxy_port}", timeout=30,
                                      headers={"host": f"{APP}.localhost"},
                                      limits=httpx.Limits(max_connections=1000)) as web:
                await api.post("/v1/apps", json={"app_name": APP, "org_slug": "personal"})
                made = (await api.post(f"/v1/apps/{APP}/machines",
                                       json={"config": config(work)})).json()
                await api.get(f"/v1/apps/{APP}/machines/{made['id']}/wait",
                              params={"state": "started", "timeout": 60})
                for _ in range(300):
                    try:
                        if (await web.get("/fast")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.2)
                await api.put(f"/v1/apps/{APP}/autoscale", json={
                    "min": 1, "max": MAX, "concurrency": 3, "scale_in_after": 10})
                load = Load(web)
                phases = [Phase("low"), Phase("high"), Phase("low again")]
                stop = asyncio.Event()
                runner = asyncio.create_task(load.run(phases[0], low, stop))
                await asyncio.sleep(15)
                stop.set()
                await runner
                stop = asyncio.Event()
                runner = asyncio.create_task(load.run(phases[1], high, stop))
                out = await wait_count(api, MAX, 180)
                await asyncio.sleep(20)
                stop.set()
                await runner
                stop = asyncio.Event()
                runner = asyncio.create_task(load.run(phases[2], low, stop))
                back = await wait_count(api, 1, 240)
                await asyncio.sleep(5)
                stop.set()
                await runner
                await load.drain()
                shown = (await api.get(f"/v1/apps/{APP}/autoscale")).json()
            print(f"stepped load, {low:g} -> {high:g} -> {low:g} req/s, {work * 1000:g} ms a "
                  f"request, concurrency 3 a machine, 1 to {MAX} machines")
            for phase in phases:
                print("  " + phase.line())
            print(f"  {MAX} machines started {out:.1f} s after the step up; back to 1 "
                  f"{back:.1f} s after the step down (scale-in window 10 s)")
            print(f"  last decision: {shown['decision']['reason']}")
        finally:
            await up.end()
            await sweep_data_dir(tmp / "cluster")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--high", type=float, default=100.0)
    parser.add_argument("--low", type=float, default=10.0)
    parser.add_argument("--work", type=float, default=0.1)
    args = parser.parse_args()
    asyncio.run(main(args.high, args.low, args.work))


if __name__ == "__main__":
    cli()
