"""Scale from zero on ``bodega up``: a stopped machine, one request through the public proxy port.

``bodega up`` as a user runs it (one region, one worker, ``--driver process``, its
registry, broker and proxy running; its own data dir, free ports; the proxy's data
plane is HAProxy when it is installed, as ``bodega up`` chooses). One process machine
runs a small HTTP server (``bench/proxy/http.py``'s) behind an ``autostart`` service. Timed
in turn, run after run:

- bare: spawn the same program with ``asyncio`` and send it the same request as soon as
  its port accepts (the baseline);
- bodega up: stop the machine through the public API, wait until the proxy's view has
  it stopped, then send one ``GET`` to the proxy's public port (``Host:
  bench.localhost``) and time it until it is answered.

Prints medians and p90, the ratio to the bare baseline, every run's ratio, the load
average beside them, and where a wake's time goes, from the components' own records:
the worker's events (``start starting``, committed on its start call; ``start
started``, the spawn's step committed) and the proxy's log of the wake (how long the
worker's start call took, then how long its port took to accept). ``--profile DIR``
records the worker and the proxy with py-spy meanwhile. ``--at-rest N`` first leaves N
machines of another app at rest on the worker, as a worker holding apps scaled to zero
has them.

    python -m bench.proxy.cold_start [--runs 20] [--profile DIR] [--at-rest N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port
from tests.leftovers_kit import sweep_data_dir
from tests.python_kit import machine_python

from bench.proxy.http import APP, first_response
from bench.rigs.start_stages import MOST_AT_REST, leave_at_rest, room_for, stop_profiles
from bench.rigs.start_stages import profiled as spied

HOST = "bench.localhost"
WAKE = re.compile(r"started for a request in ([\d.]+) ms \(its worker's start answered in "
                  r"([\d.]+) ms\)")


def machine_config(marks: Path) -> dict[str, Any]:
    return {"image": "bench/hello",
            "init": {"exec": [machine_python(), "-c", APP, "8080", str(marks)]},
            "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256},
            "restart": {"policy": "no"},
            "services": [{"protocol": "tcp", "internal_port": 8080, "autostart": True,
                          "autostop": "off", "ports": [{"port": 80, "handlers": ["http"]}],
                          "concurrency": {"soft_limit": 1000}}]}


@dataclass(frozen=True)
class Wake:
    """One cold start's marks: epoch seconds from the client, the worker and the program,
    and the proxy's own durations of the wake (seconds)."""

    call: float
    answered: float
    starting: float  # the worker committed the start's first step
    started: float  # the worker committed the spawn
    runs: float  # the program's first statement
    listens: float  # its port listens
    wake: float  # the proxy: from asking the worker to the port accepting
    start_call: float  # the proxy: the worker's start call alone


@dataclass(frozen=True)
class Bare:
    call: float  # spawned
    runs: float
    listens: float
    answered: float


STAGES: tuple[tuple[str, Callable[[Wake], float]], ...] = (
    ("proxy receives -> worker commits 'starting'", lambda w: w.starting - w.call),
    ("worker: network check, spawn, commits 'started'", lambda w: w.started - w.starting),
    ("spawn committed -> program's first statement", lambda w: w.runs - w.started),
    ("first statement -> port listens", lambda w: w.listens - w.runs),
    ("listens -> proxy's probe, forward, response", lambda w: w.answered - w.listens),
    ("(the worker's start call, as the proxy timed it)", lambda w: w.start_call),
    ("(the wake, as the proxy timed it)", lambda w: w.wake),
)
BARE_STAGES: tuple[tuple[str, Callable[[Bare], float]], ...] = (
    ("spawn -> program's first statement", lambda b: b.runs - b.call),
    ("first statement -> port listens", lambda b: b.listens - b.runs),
    ("listens -> the answer", lambda b: b.answered - b.listens),
)


def last_marks(path: Path) -> tuple[float, float]:
    began, listened = path.read_text().splitlines()[-1].split()
    return float(began), float(listened)


async def bare_cold(port: int, marks: Path) -> Bare:
    """From spawning the program to its first answer."""
    call, began = time.time(), time.perf_counter()
    process = await asyncio.create_subprocess_exec(machine_python(), "-c", APP, str(port),
                                                   str(marks))
    await first_response(f"http://127.0.0.1:{port}", "localhost")
    elapsed = time.perf_counter() - began
    process.kill()
    await process.wait()
    return Bare(call, *last_marks(marks), call + elapsed)


class Api:
    def __init__(self, url: str, token: str) -> None:
        self.url = f"{url}/v1/apps/bench/machines"
        self.session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"})

    async def call(self, method: str, path: str = "", **kw: Any) -> Any:
        async with self.session.request(method, f"{self.url}{path}", **kw) as r:
            doc = await r.json()
            if r.status >= 400:
                raise SystemExit(f"{method} {path or '/'}: {r.status} {doc}")
            return doc


async def until_stopped_in_view() -> None:
    """The proxy's view has the machine stopped (and HAProxy sends its requests to the
    activator) once the registry's gossip brings the stop, within a round or two. Every
    run checks afterwards that the proxy logged a wake, so a request that beat the view
    fails the bench rather than counting."""
    await asyncio.sleep(1.5)


def wakes_logged(log: Path) -> list[tuple[float, float]]:
    return [(float(m.group(1)) / 1000, float(m.group(2)) / 1000)
            for m in WAKE.finditer(log.read_text())]


async def main(runs: int, profile: Path | None, at_rest: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bodega-cold-") as name:
        tmp = Path(name)
        os.environ["BODEGA_CONFIG"] = str(tmp / "contexts.toml")  # not the user's contexts
        proxy_port = free_port()
        up = await UpProcess(
            tmp / "cluster", "--regions", "ams", "--workers-per-region", "1",
            "--driver", "process", "--api-port", str(free_port()),
            "--proxy-port", str(proxy_port), "--proxy-tls-port", str(free_port()),
            # Machines on a range no test or other bench holds (tests/cidr_kit.py).
            "--machine-cidr", machine_cidr(200, 232), "--log-level", "info",
            *room_for(at_rest)).start()
        proxy = f"http://127.0.0.1:{proxy_port}"
        times: dict[str, list[float]] = {"bare": [], "up": []}
        wakes: list[Wake] = []
        bares: list[Bare] = []
        shared = tmp / "marks"  # the machine's program runs as an unprivileged user
        shared.mkdir(mode=0o777)
        shared.chmod(0o777)
        tmp.chmod(0o755)  # noqa: ASYNC240 (once, before the runs)
        machine_marks, bare_marks = shared / "machine", shared / "bare"
        machine_marks.touch(mode=0o666)
        machine_marks.chmod(0o666)
        loads = [load()]
        spies: list[asyncio.subprocess.Process] = []
        plane = ""
        api: Api | None = None
        try:
            await up.until_line("bodega is up")
            api = Api(up.state()["api_url"], up.token())
            async with api.session.post(api.url.removesuffix("/bench/machines"),
                                        json={"app_name": "bench", "org_slug": "personal"}):
                pass
            await leave_at_rest(api.session, up.state()["api_url"], at_rest)
            machine = await api.call("POST", json={"config": machine_config(machine_marks)})
            mid = machine["id"]
            await api.call("GET", f"/{mid}/wait", params={"state": "started", "timeout": "60"})
            for _ in range(300):  # the proxy hears of the machine through the registry
                try:
                    await first_response(proxy, HOST, timeout=1)
                    break
                except Exception:
                    await asyncio.sleep(0.1)
            proxy_log = up.data_dir / "logs" / "proxy.log"
            plane = next((line for line in proxy_log.read_text().splitlines()
                          if "data plane" in line), "")
            for run in range(3 + runs):  # interleaved, so drift affects both alike
                if run == 3 and profile is not None:
                    spies = await spied_proxy(up.data_dir, profile)
                bare = await bare_cold(free_port(), bare_marks)
                await api.call("POST", f"/{mid}/stop")
                await api.call("GET", f"/{mid}/wait", params={"state": "stopped",
                                                               "timeout": "60"})
                logged = len(wakes_logged(proxy_log))
                await until_stopped_in_view()
                call = time.time()
                elapsed = await first_response(proxy, HOST)
                answered = call + elapsed
                for _ in range(100):  # the log line is written as the wake ends
                    found = wakes_logged(proxy_log)
                    if len(found) > logged:
                        break
                    await asyncio.sleep(0.02)
                else:
                    raise SystemExit("the proxy logged no wake: the request did not start "
                                     "the machine (the view had not seen the stop?)")
                doc = await api.call("GET", f"/{mid}")
                events: dict[tuple[str, str], float] = {}
                for e in doc.get("events", []):  # each kind's latest: this wake's
                    key = (e["type"], e["status"])
                    events[key] = max(events.get(key, 0.0), e["timestamp"] / 1000)
                if run >= 3:  # the first three warm the page cache and the code paths
                    times["bare"].append(bare.answered - bare.call)
                    times["up"].append(elapsed)
                    bares.append(bare)
                    wakes.append(Wake(call, answered, events[("start", "starting")],
                                      events[("start", "started")],
                                      *last_marks(machine_marks), *found[-1]))
            loads.append(load())
            log = (up.data_dir / "logs" / "ams-1.log").read_text()
            parked = f"{log.count('from a parked launcher')} of {3 + runs + 1}"
        finally:
            await stop_profiles(spies)
            if api is not None:
                await api.session.close()
            await up.stop()
            await sweep_data_dir(tmp / "cluster")
    report(times, wakes, bares, loads, plane, parked, at_rest)


async def spied_proxy(cluster: Path, out: Path) -> list[asyncio.subprocess.Process]:
    """py-spy on the worker and the proxy (``start_stages.profiled`` takes the broker and
    the worker; the broker is not on a wake's path)."""
    return await spied(cluster, out, roles=("worker", "proxy"))


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(times: dict[str, list[float]], wakes: list[Wake], bares: list[Bare],
           loads: list[str], plane: str, parked: str, at_rest: int = 0) -> None:
    bare, up = times["bare"], times["up"]
    mb, mu = statistics.median(bare), statistics.median(up)
    print(f"scale from zero on bodega up (--driver process), {len(up)} interleaved runs; "
          f"load average {loads[0]} before, {loads[-1]} after"
          + (f"; {at_rest} machines of another app at rest on the worker" if at_rest else ""))
    if plane:
        print(f"  proxy: {plane.split(': ', 1)[-1]}")
    print(f"  bare spawn-and-respond          {mb * 1000:7.1f} ms  "
          f"p90 {statistics.quantiles(bare, n=10)[-1] * 1000:6.1f} ms")
    print(f"  bodega up, public proxy port    {mu * 1000:7.1f} ms  "
          f"p90 {statistics.quantiles(up, n=10)[-1] * 1000:6.1f} ms   "
          f"{(mu - mb) * 1000:+5.1f} ms  {mu / mb:5.2f}x")
    ratios = sorted(u / b for u, b in zip(up, bare, strict=True))
    print(f"  each run's ratio: min {ratios[0]:.2f}x, median "
          f"{statistics.median(ratios):.2f}x, max {ratios[-1]:.2f}x")
    print("  where a wake's time goes (medians; worker's events, proxy's log, client):")
    for label, stage in STAGES:
        print(f"    {label:<48} {statistics.median(stage(w) for w in wakes) * 1000:6.1f} ms")
    print("  the bare spawn's (medians):")
    for label, part in BARE_STAGES:
        print(f"    {label:<48} {statistics.median(part(b) for b in bares) * 1000:6.1f} ms")
    print(f"  worker: {parked} starts from a parked launcher")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--profile", type=Path, help="py-spy the worker and the proxy into DIR "
                        "(raw collapsed stacks)")
    parser.add_argument("--at-rest", type=int, default=0, metavar="N",
                        help="first leave N machines of another app at rest on the worker (at "
                        f"most {MOST_AT_REST}: a worker has a /24 of addresses)")
    args = parser.parse_args()
    if not 0 <= args.at_rest <= MOST_AT_REST:
        parser.error(f"--at-rest takes 0 to {MOST_AT_REST} machines")
    asyncio.run(main(args.runs, args.profile, args.at_rest))
