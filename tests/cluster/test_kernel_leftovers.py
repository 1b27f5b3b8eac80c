"""`bodega up` leaves nothing in the kernel, never takes another cluster's objects, and
`bodega clean` removes what a cluster killed with SIGKILL left.

Real clusters, as root: machines in namespaces with cgroups (process machines; one
suspended, so it has a freezer cgroup; one with a volume, so it has a mount namespace;
one stopped, so its namespace is idle), and an image machine (overlay root, runc state,
cgroups in every controller). The host's objects are listed the way an operator would
(`ip netns`, `ip link`, `nft list tables`, `/proc/mounts`, the cgroup trees) before
and after (``kernel_objects_kit.py``). Each test uses its own machine range (10.20-55, no
other test's) and free ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from bodega.proxy.plane import left_workdir
from tests.cidr_kit import held_octet
from tests.cluster.kernel_objects_kit import Snapshot, snapshot, unexplained
from tests.cluster.up_kit import UpProcess, free_port, in_cluster, unwire, url_host
from tests.integration.images.image_kit import build_image, needs_image_tools
from tests.poll_kit import until as poll_until
from tests.proc_kit import live_pids
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and cgroups need root")

SLEEP = "import time; time.sleep(900)"
# Dual-stack: its address is its 6PN one with the private network (on by default).
SERVE = ("import http.server, os, socket\n"
         "class H(http.server.BaseHTTPRequestHandler):\n"
         "    def do_GET(self):\n"
         "        body = os.environ['BODEGA_MACHINE_ID'].encode()\n"
         "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
         "        self.end_headers(); self.wfile.write(body)\n"
         "    def log_message(self, *args): pass\n"
         "class S(http.server.HTTPServer):\n"
         "    address_family = socket.AF_INET6\n"
         "S(('::', 8080), H).serve_forever()\n")


def second_octet(k: int) -> int:
    """This test process's k-th /16 (k < 3) in 10.20-55, which no other test uses."""
    return held_octet(f"leftovers-{k}", 20, 56)


def args(api: int, proxy: int, b: int, *extra: str) -> tuple[str, ...]:
    return ("--regions", "ams", "--workers-per-region", "2", "--worker-cpus", "4",
            "--worker-memory-mb", "4096", "--api-port", str(api), "--proxy-port", str(proxy),
            "--proxy-tls-port", str(free_port()),
            "--machine-cidr", f"10.{b}.0.0/16", "--registry-port", "0", "--driver", "process",
            *extra)


def marks(data: Path, b: int, *machines: dict[str, Any]) -> list[str]:
    """What names this cluster's objects: its id, its data dir, its machines' ids (cgroups
    and runtime state are named by them), and the names versions before cluster ids gave its
    range (what this test found left before they had them)."""
    found = [str(data), f"bodega-{b}-", f"bdg-{b}-", f"bv{b}-", f"10.{b}.",
             *(m["id"] for m in machines)]
    with_id = data / "cluster-id"
    return [with_id.read_text().strip(), *found] if with_id.exists() else found


def program_pids(marker: str) -> list[int]:
    python = machine_python().encode()
    return live_pids(lambda argv: argv[0] == python and marker.encode() in argv)


until = partial(poll_until, timeout=60.0, every=0.1)


class Api:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def machine(self, app: str, argv: list[str], **config: Any) -> dict[str, Any]:
        """A machine created and started; its record."""
        created = await self.http.post(f"/v1/apps/{app}/machines", json={"config": {
            "image": "local/test", "init": {"exec": argv}, **config}})
        assert created.status_code == 200, created.text
        mid = created.json()["id"]
        await self.wait(app, mid, "started")
        return dict((await self.http.get(f"/v1/apps/{app}/machines/{mid}")).json())

    async def wait(self, app: str, mid: str, state: str) -> None:
        waited = await self.http.get(f"/v1/apps/{app}/machines/{mid}/wait",
                                     params={"state": state, "timeout": 60})
        if waited.status_code != 200:  # what the machine went through says why
            events = (await self.http.get(f"/v1/apps/{app}/machines/{mid}")).json().get(
                "events", [])
            raise AssertionError(f"{waited.text}; events: {events[:6]}")

    async def post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = await self.http.post(path, json=body or {})
        assert answer.status_code in (200, 201), answer.text
        return dict(answer.json())


@contextlib.asynccontextmanager
async def api_of(up: UpProcess, api_port: int) -> AsyncIterator[Api]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=70,
                                 headers={"authorization": f"Bearer {up.token()}"}) as http:
        yield Api(http)


async def answers(ip: str) -> str:
    async with httpx.AsyncClient(timeout=5) as web:
        for _ in range(100):
            try:
                return (await web.get(f"http://{url_host(ip)}:8080/")).text
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
    raise AssertionError(f"nothing answers on {ip}:8080")


def clean(data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bodega", "clean", "--data-dir", str(data),
                           *extra], capture_output=True, text=True, timeout=120, check=False)


async def kill9(up: UpProcess) -> None:
    """SIGKILL `bodega up` and every component at once: no one stops anything."""
    assert up.process is not None
    pids = [c["pid"] for c in up.state()["components"] if c.get("pid")]
    for pid in (up.process.pid, *pids):
        os.kill(pid, signal.SIGKILL)
    await up.wait()
    await until(lambda: not any(Path(f"/proc/{p}").exists() and _alive(p) for p in pids))


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kernel_only(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """Namespaces, links, cgroups and mounts (not lock files, which another cluster claiming
    the same free range takes over)."""
    return {k: v for k, v in found.items() if k in ("namespaces", "links", "cgroups", "mounts")}


def assert_left_nothing(before: Snapshot, after: Snapshot, mine: list[str]) -> None:
    assert after.carrying(mine) == {}, f"left behind: {after.carrying(mine)}"
    assert unexplained(before, after, mine) == {}, (
        f"counts before {before.counts()}, after {after.counts()}")


async def test_ctrl_c_leaves_no_kernel_object_and_a_restart_wires_machines_again(
        tmp_path: Path) -> None:
    b, data = second_octet(0), tmp_path / "cluster"
    api_port = free_port()
    marker = f"kleft-{uuid.uuid4().hex[:8]}"
    before = snapshot()
    up = await UpProcess(data, *args(api_port, free_port(), b)).start()
    try:
        await up.until_line("bodega is up")
        async with api_of(up, api_port) as api:
            await api.post("/v1/apps", {"app_name": "left", "org_slug": "personal"})
            served = await api.machine("left", [machine_python(), "-c", SERVE, marker])
            sleeping = await api.machine("left", [machine_python(), "-c", SLEEP, marker])
            frozen = await api.machine("left", [machine_python(), "-c", SLEEP, marker])
            # ``started`` is the spawn committed; each program's own exec follows it (the
            # wrapper's shell, nsenter), later on a loaded host. Frozen before its exec, this
            # one would stay the wrapper, and never be counted as a program below.
            await until(lambda: len(program_pids(marker)) >= 3)
            await api.post(f"/v1/apps/left/machines/{frozen['id']}/suspend")
            await api.wait("left", frozen["id"], "suspended")
            resting = await api.machine("left", [machine_python(), "-c", SLEEP, marker])
            await api.post(f"/v1/apps/left/machines/{resting['id']}/stop")
            await api.wait("left", resting["id"], "stopped")
            volume = await api.post("/v1/apps/left/volumes",
                                    {"name": "data", "region": "ams", "size_gb": 1})
            mounting = await api.machine("left", [machine_python(), "-c", SLEEP, marker], mounts=[
                {"volume": volume["id"], "path": str(tmp_path / "mnt")}])
            assert await answers(served["private_ip"]) == served["id"]
        during = snapshot()
        machines = (served, sleeping, frozen, resting, mounting)
        mine = marks(data, b, *machines)
        held = during.carrying(mine)
        # Two workers' bridges, a namespace per machine and spares, cgroups (a freezer one
        # among them), markers and range locks: what the test expects to see go.
        assert len(held["namespaces"]) >= 5, held
        assert {"links", "cgroups", "run_files"} <= set(held), held
        assert any(c.startswith("freezer/") and c.endswith(frozen["id"])
                   for c in held["cgroups"]), held
        await until(lambda: len(program_pids(marker)) >= 4)  # each exec'd (see above)
        assert len(program_pids(marker)) == 4
    finally:
        assert await up.stop() == 0, up.output[-3000:]
    after = snapshot()
    assert_left_nothing(before, after, marks(data, b, *machines))
    assert program_pids(marker) == []

    # The same data dir again: machines keep their addresses; the start that brings back
    # what was started (docs/up.md) wires them anew, and what rested stays at rest.
    again = await UpProcess(data, *args(api_port, free_port(), b)).start()
    try:
        await again.until_line("bodega is up")
        async with api_of(again, api_port) as api:
            await api.wait("left", served["id"], "started")
            assert await answers(served["private_ip"]) == served["id"]
            rested = (await api.http.get(f"/v1/apps/left/machines/{resting['id']}")).json()
            assert rested["state"] == "stopped"
            # A machine at rest gets its namespace back ahead of its next start.
            namespace = f"bodega-{mine[0]}-{b}-"
            await until(lambda: len([n for n in snapshot().namespaces
                                     if n.startswith(namespace)]) >= 5)
    finally:
        assert await again.stop() == 0, again.output[-3000:]
    assert_left_nothing(before, snapshot(), marks(data, b, *machines))


@needs_image_tools
async def test_an_image_machines_mounts_runtime_state_and_cgroups_go_with_the_cluster(
        tmp_path: Path) -> None:
    b, data = second_octet(1), tmp_path / "cluster"
    api_port, registry = free_port(), free_port()
    before = snapshot()
    up = await UpProcess(data, *args(api_port, free_port(), b, "--driver", "auto",
                                     "--registry-port", str(registry))).start()
    try:
        await up.until_line("bodega is up")
        image = await asyncio.to_thread(build_image, tmp_path, f"127.0.0.1:{registry}",
                                        "kleft/web:v1", cluster=data)
        async with api_of(up, api_port) as api:
            await api.post("/v1/apps", {"app_name": "img", "org_slug": "personal"})
            created = await api.http.post("/v1/apps/img/machines", json={"config": {
                "image": image}})
            assert created.status_code == 200, created.text
            await api.wait("img", created.json()["id"], "started")
        made = created.json()
        # Started once the worker spawned it; the runtime makes its state and its cgroups as
        # it creates the container, a moment later on a busy host.
        held: dict[str, list[str]] = {}
        for _ in range(200):
            held = snapshot().carrying(marks(data, b, made))
            if any(f.startswith("runc/") for f in held.get("run_files", [])) and \
                    any(c.startswith("pids/") for c in held.get("cgroups", [])):
                break
            await asyncio.sleep(0.05)
        assert any(" overlay" in m for m in held.get("mounts", [])), held
        assert any(f.startswith("runc/") for f in held.get("run_files", [])), held
        assert any(c.startswith("pids/") for c in held.get("cgroups", [])), held  # runc's
    finally:
        assert await up.stop() == 0, up.output[-3000:]
    assert_left_nothing(before, snapshot(), marks(data, b, made))


async def test_a_second_cluster_neither_adopts_nor_removes_the_firsts_objects(
        tmp_path: Path) -> None:
    b, other = second_octet(2), second_octet(1)
    one, two = tmp_path / "one", tmp_path / "two"
    api_one, api_two = free_port(), free_port()
    marker = f"kleft-{uuid.uuid4().hex[:8]}"
    up = await UpProcess(one, *args(api_one, free_port(), b)).start()
    try:
        await up.until_line("bodega is up")
        async with api_of(up, api_one) as api:
            await api.post("/v1/apps", {"app_name": "first", "org_slug": "personal"})
            first = await api.machine("first", [machine_python(), "-c", SLEEP, marker])
        await kill9(up)  # its namespaces, bridges, cgroups and machine stay behind

        def firsts() -> dict[str, list[str]]:
            return kernel_only(snapshot().carrying(marks(one, b, first)))

        held = firsts()
        assert len(held["namespaces"]) >= 2, held
        assert {"links", "cgroups"} <= set(held), held
        (program,) = program_pids(marker)

        # A cluster on the same range would wire beside the first's bridge (or, named by
        # range alone, adopt its namespaces): it is refused, naming the way out.
        refused = await UpProcess(two, *args(api_two, free_port(), b)).start()
        assert await refused.wait() == 1
        errors = [line for line in refused.lines if line.startswith("Error: ")]
        assert len(errors) == 1, refused.output
        assert f"machine subnet 10.{b}." in errors[0]
        assert "is in use on this host" in errors[0]
        assert "bodega clean --data-dir" in errors[0]
        assert "--machine-cidr" in errors[0]

        # On a range of its own it runs, and its start and stop sweeps leave the first's be.
        second = await UpProcess(two, *args(api_two, free_port(), other)).start()
        try:
            await second.until_line("bodega is up")
            async with api_of(second, api_two) as api:
                await api.post("/v1/apps", {"app_name": "second", "org_slug": "personal"})
                made = await api.machine("second", [machine_python(), "-c", SLEEP, marker])
            assert in_cluster(made["private_ip"], two, f"10.{other}.0.0/16")
            assert marks(two, other)[0] != marks(one, b)[0]  # two cluster ids
            seconds = kernel_only(snapshot().carrying(marks(two, other, made)))
            assert len(seconds["namespaces"]) >= 2, seconds
            assert firsts() == held
        finally:
            assert await second.stop() == 0, second.output[-3000:]
        assert snapshot().carrying(marks(two, other, made)) == {}
        assert firsts() == held
        assert program_pids(marker) == [program]
    finally:
        await unwire(one)
        await unwire(two)
    assert program_pids(marker) == []


async def test_clean_removes_what_a_cluster_killed_with_sigkill_left(tmp_path: Path) -> None:
    b, data = second_octet(2), tmp_path / "cluster"
    api_port = free_port()
    marker = f"kleft-{uuid.uuid4().hex[:8]}"
    before = snapshot()
    up = await UpProcess(data, *args(api_port, free_port(), b)).start()
    try:
        await up.until_line("bodega is up")
        async with api_of(up, api_port) as api:
            await api.post("/v1/apps", {"app_name": "kept", "org_slug": "personal"})
            served = await api.machine("kept", [machine_python(), "-c", SERVE, marker])
            resting = await api.machine("kept", [machine_python(), "-c", SLEEP, marker])
            await api.post(f"/v1/apps/kept/machines/{resting['id']}/stop")
            await api.wait("kept", resting["id"], "stopped")
        refused = clean(data)
        assert refused.returncode == 1
        assert refused.stderr.splitlines() == [
            f"Error: the cluster in {data} is running: bodega up is running on it (pid "
            f"{up.process.pid if up.process else 0}); stop it first (it cleans up after "
            "itself when it stops)"]
        await kill9(up)
    finally:
        if up.process is not None and up.process.returncode is None:
            await up.stop()
    mine = marks(data, b, served, resting)
    left = snapshot().carrying(mine)
    assert {"namespaces", "links", "cgroups", "run_files"} <= set(left), left
    (program,) = program_pids(marker)  # the started machine outlived its cluster

    # The proxy died with it and left its HAProxy files (their TLS keys among them).
    haproxy_files = left_workdir(data / "proxy")
    assert haproxy_files is not None or shutil.which("haproxy") is None

    listed = clean(data, "--dry-run")
    assert listed.returncode == 0, listed.stderr
    assert f"would kill process {program} (" in listed.stdout
    if haproxy_files is not None:
        assert f"would remove a killed proxy's HAProxy files (TLS keys among them) in " \
               f"{haproxy_files}" in listed.stdout
        assert haproxy_files.exists()  # a dry run removes nothing
    for namespace in left["namespaces"]:
        assert f"would remove network namespace {namespace}" in listed.stdout
    assert snapshot().carrying(mine) == left  # a dry run removes nothing

    done = clean(data)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("removed ")
    assert done.stdout.splitlines()[-1].endswith(f"leftovers of cluster {mine[0]}")
    assert_left_nothing(before, snapshot(), mine)
    assert program_pids(marker) == []
    assert haproxy_files is None or not haproxy_files.exists()
    # (Port claims another cluster killed meanwhile left may be listed before it.)
    assert clean(data).stdout.splitlines()[-1] == f"nothing to clean for cluster {mine[0]}"

    # Started again, the cluster finds its machine's process gone (and its namespace): the
    # restart policy starts it in a namespace wired afresh; the stopped one stays stopped.
    again = await UpProcess(data, *args(api_port, free_port(), b)).start()
    try:
        await again.until_line("bodega is up")
        async with api_of(again, api_port) as api:
            await api.wait("kept", served["id"], "started")
            assert await answers(served["private_ip"]) == served["id"]
            rested = (await api.http.get(f"/v1/apps/kept/machines/{resting['id']}")).json()
            assert rested["state"] == "stopped"
    finally:
        assert await again.stop() == 0, again.output[-3000:]
    assert_left_nothing(before, snapshot(), mine)
