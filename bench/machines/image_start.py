"""Image machines: cold and warm start through the public API, against runc and podman.

Runs ``bodega up`` (one region, two workers, its own registry), pushes small
busybox images built offline with umoci, and times, until the machine's HTTP
port answers:

- **cold**: create through the broker's Machines API, image not cached on any
  worker (each run pushes a fresh image);
- **warm**: the same, image cached (a worker already holds it);
- **runc**: ``runc run --detach`` of a bundle made of the same unpacked image,
  the runtime's own start with no orchestration; **crun** the same, where crun is
  installed, run as the worker runs it (the workers use crun there unless
  ``--oci-runtime runc``);
- **podman**: ``podman run --runtime runc -d`` of the same image (pulled first).

Every timed start, of every side, begins after 0.3 s with nothing started
(``QUIET_SECONDS``): a create on an idle host pays the kernel's cgroup-lock wait
(docs/images.md), and a side that ran right after another's cgroup work would not.

Then a placement run: creates of a cached image land on the worker holding it
(its ``image`` subscore), until that worker is full, when the other one wins.

    python bench/machines/image_start.py [--runs 10] [--oci-runtime auto|runc|crun]
"""

# The runtimes are timed as a shell would run them, one blocking call at a time.
# ruff: noqa: ASYNC221

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.integration.images.image_kit import build_image, cluster_auth

from bench.rigs.start_stages import Marks, breakdown
from bodega.worker.drivers.oci.core import runtimes
from bodega.worker.host.image_drivers import unified_controllers

CIDR = "10.253.0.0/16"
MARKS: list[Marks] = []  # where a warm start's time goes (the broker's and worker's marks)
WARMUPS = 2
PODMAN_LIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
# Every timed start begins after this long with nothing started or moved between cgroups.
# The kernel keeps its cgroup lock ready for a few milliseconds after a process changes
# cgroups (docs/images.md), and whatever ran just before a side (a destroy's cleanup, a
# launcher parked in a freed namespace) would otherwise speed that side up by chance.
QUIET_SECONDS = 0.3


async def until_http(url: str, deadline: float = 60.0) -> None:
    """Until ``url`` answers 200: a bare HTTP/1.0 GET on a fresh socket every millisecond.

    The same probe for every side; an HTTP client library here costs milliseconds of the
    bench's own CPU per try, which on two busy cores slows the start it is timing.
    """
    rest = url.removeprefix("http://")
    address, _, path = rest.partition("/")
    host, _, port = address.rpartition(":")
    request = f"GET /{path} HTTP/1.0\r\nHost: {address}\r\n\r\n".encode()
    end = time.perf_counter() + deadline
    while True:
        with contextlib.suppress(OSError):
            reader, writer = await asyncio.open_connection(host, int(port))
            try:
                writer.write(request)
                if (await reader.readline()).split(b" ")[1:2] == [b"200"]:
                    return
            finally:
                writer.close()
        if time.perf_counter() > end:
            raise TimeoutError(url)
        await asyncio.sleep(0.001)


async def api_start(http: httpx.AsyncClient, image: str, memory_mb: int = 256) -> tuple[
        float, dict[str, Any], Marks]:
    """Seconds from the create call until the machine's port answers; the machine; the
    broker's and the worker's marks of it (read after the clock stopped)."""
    await asyncio.sleep(QUIET_SECONDS)
    call, start = time.time(), time.perf_counter()
    created = await http.post("/v1/apps/bench/machines", json={"config": {
        "image": image, "guest": {"cpus": 1, "memory_mb": memory_mb}}})
    created.raise_for_status()
    machine, answered = created.json(), time.time()
    while not machine.get("private_ip"):
        machine = (await http.get(f"/v1/apps/bench/machines/{machine['id']}")).json()
    await until_http(f"http://{machine['private_ip']}:8080/")
    elapsed = time.perf_counter() - start
    path = f"/v1/apps/bench/machines/{machine['id']}"
    marks = Marks.of(call, answered, call + elapsed, (await http.get(path)).json(),
                     (await http.get(f"{path}/placement")).json())
    return elapsed, machine, marks


async def destroy(http: httpx.AsyncClient, machine_id: str) -> None:
    """Destroy and wait until it is gone, so no teardown overlaps the next start."""
    await http.delete(f"/v1/apps/bench/machines/{machine_id}", params={"force": "true"})
    await http.get(f"/v1/apps/bench/machines/{machine_id}/wait",
                   params={"state": "destroyed", "timeout": 60})


def runtime_argv(runtime: str, work: Path) -> list[str]:
    """The peer's runtime: runc as a shell runs it; crun as the worker runs it (without
    the v2 hierarchy on a hybrid host, ``drivers/oci/core/runtimes.py``), state of its own."""
    if runtime == "runc":
        return ["runc"]
    return [*runtimes.command(runtime, unified_controllers()), "--root", str(work / runtime)]


async def runc_start(base_rootfs: Path, work: Path, index: int,
                     machine_config: dict[str, Any], runtime: str = "runc") -> float:
    """The runtime alone: the machine's own bundle config (its namespaces, mounts, limits and
    a cgroups path of its own), on an overlay of the same base; host network, a free port."""
    port = free_port()
    bundle = work / f"runc-{index}"
    for sub in ("upper", "work", "rootfs"):
        (bundle / sub).mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={base_rootfs},upperdir={bundle / 'upper'},"
                    f"workdir={bundle / 'work'}", str(bundle / "rootfs")], check=True)
    config = json.loads(json.dumps(machine_config))
    config["process"]["args"] = ["/bin/httpd", "-f", "-p", f"127.0.0.1:{port}", "-h", "/www"]
    config["root"]["path"] = str(bundle / "rootfs")
    name = f"bench-{os.getpid()}-{index}"
    config["linux"]["cgroupsPath"] = f"/bodega-bench/{name}"
    config["linux"]["namespaces"] = [ns for ns in config["linux"]["namespaces"]
                                     if ns["type"] != "network"]  # the host's: to reach it
    (bundle / "config.json").write_text(json.dumps(config))
    command = runtime_argv(runtime, work)
    await asyncio.sleep(QUIET_SECONDS)
    start = time.perf_counter()
    subprocess.run([*command, "run", "--detach", "--bundle", str(bundle), name], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    await until_http(f"http://127.0.0.1:{port}/")
    elapsed = time.perf_counter() - start
    subprocess.run([*command, "delete", "--force", name], check=False)
    subprocess.run(["umount", "-l", str(bundle / "rootfs")], check=False)
    return elapsed


async def podman_start(image: str, index: int) -> float:
    port = free_port()
    name = f"bench-{os.getpid()}-{index}"
    await asyncio.sleep(QUIET_SECONDS)
    start = time.perf_counter()
    subprocess.run(["podman", "run", "--runtime", "runc", *PODMAN_LIMITS, "-d", "--name", name,
                    "--network", "host", "--tls-verify=false", image, "-f", "-p",
                    f"127.0.0.1:{port}", "-h", "/www"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    await until_http(f"http://127.0.0.1:{port}/")
    elapsed = time.perf_counter() - start
    subprocess.run(["podman", "rm", "-f", "-t", "0", name], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return elapsed


def remove_peer_cgroups() -> None:
    """The parents of the runc peer's cgroups (runc delete removes each run's own)."""
    for parent in Path("/sys/fs/cgroup").glob("*/bodega-bench"):
        with contextlib.suppress(OSError):
            parent.rmdir()


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f} ms (min {min(values) * 1000:.1f})"


async def main(runs: int, oci_runtime: str) -> None:
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="bodega-image-bench-"))
    os.environ["BODEGA_CONFIG"] = str(work / "contexts.toml")  # not the user's contexts
    api, proxy, registry = free_port(), free_port(), free_port()
    host = f"127.0.0.1:{registry}"
    images: list[str] = []
    up = await UpProcess(work / "cluster", "--regions", "ams", "--workers-per-region", "2",
                         "--worker-cpus", "4", "--worker-memory-mb", "2048",
                         "--api-port", str(api), "--proxy-port", str(proxy),
                         "--proxy-tls-port", str(free_port()),
                         "--registry-port", str(registry), "--machine-cidr", CIDR,
                         f"--worker-arg=--oci-runtime={oci_runtime}").start()
    try:
        await up.until_line("bodega is up")
        headers = {"authorization": f"Bearer {up.token()}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api}", headers=headers,
                                     timeout=60) as http:
            (await http.post("/v1/apps", json={"app_name": "bench",
                                               "org_slug": "personal"})).raise_for_status()
            cold, warm, runc, crun, podman = [], [], [], [], []
            with_crun = shutil.which("crun") is not None
            images = [await asyncio.to_thread(build_image, work, host, f"bench/cold{i}:v1",
                                              page=f"cold {i}\n", cluster=work / "cluster")
                      for i in range(runs)]
            for image in images:
                elapsed, machine, _ = await api_start(http, image)
                cold.append(elapsed)
                await destroy(http, machine["id"])
            warm_image = images[0]
            certs, auth = cluster_auth(work / "cluster", host, work / "podman-auth")
            subprocess.run(["podman", "pull", "--cert-dir", str(certs), "--authfile", str(auth),
                            warm_image], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            holders: set[str] = set()
            machine_config: dict[str, Any] = {}
            base: list[Path] = []

            async def warm_start() -> float:
                elapsed, machine, marks = await api_start(http, warm_image)
                MARKS.append(marks)
                for path in (work / "cluster" / "workers").glob(
                        f"*/machines/{machine['id']}/oci/config.json"):
                    machine_config.update(json.loads(path.read_text()))
                    digest = (path.parent / "image").read_text().strip().split(":")[1]
                    base[:] = [path.parents[3] / "images" / "bases" / digest / "rootfs"]
                placed = (await http.get(
                    f"/v1/apps/bench/machines/{machine['id']}/placement")).json()
                holders.add(placed["winner"]["worker"])
                await destroy(http, machine["id"])
                return elapsed

            # Warm-ups (not counted), then the three in turn, so a burst of load on the
            # shared host falls on all of them alike.
            for i in range(WARMUPS):
                await warm_start()
                await runc_start(base[0], work, -1 - i, machine_config)
                if with_crun:
                    await runc_start(base[0], work, -11 - i, machine_config, "crun")
                await podman_start(warm_image, -1 - i)
            MARKS.clear()
            for i in range(runs):
                warm.append(await warm_start())
                runc.append(await runc_start(base[0], work, i, machine_config))
                if with_crun:
                    crun.append(await runc_start(base[0], work, 100 + i, machine_config, "crun"))
                podman.append(await podman_start(warm_image, i))

            # Placement: the holder wins while it has room, then the other worker does.
            # One app each, so spreading an app's machines does not enter into it.
            placements = []
            big = []
            for i in range(3):
                app = f"fill{i}"
                (await http.post("/v1/apps", json={"app_name": app,
                                                   "org_slug": "personal"})).raise_for_status()
                created = await http.post(f"/v1/apps/{app}/machines", json={"config": {
                    "image": warm_image, "guest": {"cpus": 1, "memory_mb": 768}}})
                created.raise_for_status()
                mid = created.json()["id"]
                big.append((app, mid))
                placed = (await http.get(f"/v1/apps/{app}/machines/{mid}/placement")).json()
                placements.append((placed["winner"]["worker"],
                                   placed["winner"]["subscores"].get("image", 0.0)))
            for app, mid in big:
                await http.delete(f"/v1/apps/{app}/machines/{mid}", params={"force": "true"})

        print(f"image machine start until its HTTP port answers ({runs} runs each, "
              f"{WARMUPS} warm-ups; load average {load_before} before, "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} after)")
        print(f"  cold (pull + unpack), public API  {ms(cold)}")
        print(f"  warm (cached), public API         {ms(warm)}")
        print(f"  runc run --detach, same bundle    {ms(runc)}")
        if crun:
            print(f"  crun run --detach, same bundle    {ms(crun)}")
        print(f"  podman run --runtime runc         {ms(podman)}")
        print("  warm, where the time goes (medians; broker's and worker's timestamps; "
              "'runs' is the port answering):")
        for label, seconds in breakdown(MARKS):
            print(f"    {label:<48} {seconds * 1000:6.1f} ms")
        print(f"  warm / runc   {statistics.median(warm) / statistics.median(runc):.2f}x")
        if crun:
            print(f"  warm / crun   {statistics.median(warm) / statistics.median(crun):.2f}x")
        print(f"  warm / podman {statistics.median(warm) / statistics.median(podman):.2f}x")
        print(f"  warm starts landed on {sorted(holders)} (the image's holder)")
        print("  768 MB creates of the cached image on 2048 MB workers: "
              + ", ".join(f"{w} (image {s:+.2f})" for w, s in placements))
    finally:
        await up.stop()
        await unwire(work / "cluster")
        subprocess.run(["podman", "rmi", "-f", *images], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
        remove_peer_cgroups()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--oci-runtime", default="auto", choices=runtimes.RUNTIMES,
                        help="the workers' runtime (auto: crun if installed, else runc)")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.oci_runtime))
