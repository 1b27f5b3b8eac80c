"""Resume of a suspended machine against a start of a stopped one, through the public API.

Runs ``bodega up`` (one region, one worker) and, for one machine config at a
time, times ``POST .../start`` until the machine's HTTP port answers 200:

- **start**: the machine was stopped (``POST .../stop``): a new process is
  spawned and must boot its program before it serves;
- **resume**: the machine was suspended (``POST .../suspend``): its frozen
  process is thawed and serves at once, memory and listening socket kept.

Each cycle does both on the same machine, alternating, so drift hits both
alike. Configs: a host-command machine (a Python HTTP server: the process
driver, cgroup freezer), and when the image tools are installed an image
machine (busybox httpd: the oci driver, ``runc pause``/``resume``).

    python bench/machines/suspend.py [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.python_kit import machine_python

CIDR = "10.252.0.0/16"
SERVER = ("import http.server, socketserver\n"
          "class H(http.server.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        self.send_response(200); self.end_headers(); self.wfile.write(b'ok')\n"
          "    def log_message(self, *a): pass\n"
          "socketserver.TCPServer.allow_reuse_address = True\n"
          "http.server.ThreadingHTTPServer(('0.0.0.0', 8080), H).serve_forever()\n")


async def until_http(http: httpx.AsyncClient, url: str, deadline: float = 60.0) -> None:
    end = time.perf_counter() + deadline
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if (await http.get(url, timeout=1)).status_code == 200:
                return
        if time.perf_counter() > end:
            raise TimeoutError(url)
        await asyncio.sleep(0.001)


async def wait_state(api: httpx.AsyncClient, mid: str, state: str) -> None:
    answer = await api.get(f"/v1/apps/bench/machines/{mid}/wait",
                           params={"state": state, "timeout": 60})
    answer.raise_for_status()


async def timed_start(api: httpx.AsyncClient, probe: httpx.AsyncClient, mid: str,
                      url: str) -> float:
    began = time.perf_counter()
    (await api.post(f"/v1/apps/bench/machines/{mid}/start")).raise_for_status()
    await until_http(probe, url)
    return time.perf_counter() - began


async def cycle(api: httpx.AsyncClient, config: dict[str, Any], runs: int) -> tuple[
        list[float], list[float]]:
    created = await api.post("/v1/apps/bench/machines", json={"config": config})
    created.raise_for_status()
    mid = created.json()["id"]
    await wait_state(api, mid, "started")
    machine = (await api.get(f"/v1/apps/bench/machines/{mid}")).json()
    url = f"http://{machine['private_ip']}:8080/"
    starts, resumes = [], []
    async with httpx.AsyncClient() as probe:
        await until_http(probe, url)
        for index in range(runs + 1):  # the first cycle warms both paths up, untimed
            (await api.post(f"/v1/apps/bench/machines/{mid}/stop")).raise_for_status()
            await wait_state(api, mid, "stopped")
            start = await timed_start(api, probe, mid, url)
            (await api.post(f"/v1/apps/bench/machines/{mid}/suspend")).raise_for_status()
            await wait_state(api, mid, "suspended")
            resume = await timed_start(api, probe, mid, url)
            if index:
                starts.append(start)
                resumes.append(resume)
    await api.delete(f"/v1/apps/bench/machines/{mid}", params={"force": "true"})
    await api.get(f"/v1/apps/bench/machines/{mid}/wait",
                  params={"state": "destroyed", "timeout": 60})
    return starts, resumes


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f} ms (p90 " \
           f"{statistics.quantiles(values, n=10)[-1] * 1000:.1f})"


async def main(runs: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="bodega-suspend-bench-"))
    os.environ["BODEGA_CONFIG"] = str(work / "contexts.toml")  # not the user's contexts
    api_port, proxy, registry = free_port(), free_port(), free_port()
    images = shutil.which("umoci") is not None and shutil.which("runc") is not None
    up = await UpProcess(work / "cluster", "--regions", "ams", "--workers-per-region", "1",
                         "--worker-cpus", "4", "--worker-memory-mb", "2048",
                         "--api-port", str(api_port), "--proxy-port", str(proxy),
                         "--proxy-tls-port", str(free_port()),
                         "--registry-port", str(registry), "--machine-cidr", CIDR).start()
    configs: dict[str, dict[str, Any]] = {"process (python http.server)": {
        "image": "bench/server", "guest": {"cpus": 1, "memory_mb": 256},
        "init": {"exec": [machine_python(), "-c", SERVER]}}}
    results: dict[str, tuple[list[float], list[float]]] = {}
    try:
        await up.until_line("bodega is up")
        if images:
            from tests.integration.images.image_kit import build_image
            image = await asyncio.to_thread(build_image, work, f"127.0.0.1:{registry}",
                                            "bench/nap:v1", cluster=work / "cluster")
            configs["oci (busybox httpd)"] = {"image": image,
                                             "guest": {"cpus": 1, "memory_mb": 256}}
        headers = {"authorization": f"Bearer {up.token()}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}",
                                     headers=headers, timeout=60) as api:
            (await api.post("/v1/apps", json={"app_name": "bench",
                                              "org_slug": "personal"})).raise_for_status()
            for name, config in configs.items():
                results[name] = await cycle(api, config, runs)
    finally:
        await up.stop()
        await unwire(work / "cluster")
        shutil.rmtree(work, ignore_errors=True)
    print(f"start of a machine until its HTTP port answers, public API, {runs} runs each:")
    for name, (starts, resumes) in results.items():
        ratio = statistics.median(starts) / statistics.median(resumes)
        print(f"  {name}")
        print(f"    start of a stopped machine    {ms(starts)}")
        print(f"    resume of a suspended one     {ms(resumes)}")
        print(f"    start / resume                {ratio:7.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args().runs))
