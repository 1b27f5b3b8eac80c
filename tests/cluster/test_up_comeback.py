"""Machines come back as they were when `bodega up` starts again on the same data dir.

A real `bodega up` (two workers, process driver) runs one machine of each kind: restart
policy ``always``, ``no``, the default (``on-failure``), one the user stopped, and a
primary with its standby. Ctrl-C stops them all; the next `bodega up` starts again those
that were started, except the one of policy ``no``; the user's stop and the standby
stay. Then every process of the cluster, machines included, is killed with SIGKILL, as a
host that loses power: the next `bodega up` brings back the same ones. Last, `bodega up`
gets SIGTERM (systemd's stop, an upgrade): the machines run on, the same programs, and the
next `bodega up` re-adopts them without starting anything; stopped so once more, the next
`bodega up` runs one worker fewer, and what ran on the worker it no longer has goes (no
worker would ever take it up), while the other worker's machines run on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.poll_kit import until as poll_until
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

APP = "comeback"
TOKEN = "comeback-token"
RESTING = ("created", "stopped")
# What comes back started, what stays at rest; a standby whose primary runs rests.
CAME_BACK = {"always": "started", "default": "started", "no": "stopped",
             "user-stopped": "stopped", "primary": "started", "standby": "resting"}
until = partial(poll_until, timeout=120.0, every=0.5)


class Cluster:
    """One data dir, run by one `bodega up` after another on the same ports."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.api = free_port()
        self.args = ("--regions", "ams", "--workers-per-region", "2", "--worker-cpus", "4",
                     "--worker-memory-mb", "2048", "--api-port", str(self.api),
                     "--proxy-port", str(free_port()), "--proxy-tls-port", str(free_port()),
                     "--machine-cidr", machine_cidr(140, 200), "--token", TOKEN,
                     "--registry-port", "0")

    @contextlib.asynccontextmanager
    async def up(self, *more: str) -> AsyncIterator[tuple[UpProcess, httpx.AsyncClient]]:
        """``more``: flags after the usual ones (the last of a flag given twice wins)."""
        up = await UpProcess(self.data_dir, *self.args, *more).start()
        try:
            await up.until_line("bodega is up", timeout=120)
            async with httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{self.api}/v1/apps/{APP}", timeout=90,
                    headers={"authorization": f"Bearer {TOKEN}"}) as api:
                yield up, api
        finally:
            await up.end()


async def create(api: httpx.AsyncClient, name: str, marker: str, *, skip_launch: bool = False,
                 **config: Any) -> str:
    program = [machine_python(), "-c", "import time; time.sleep(10**6)", marker, name]
    created = await api.post("/machines", json={"name": name, "skip_launch": skip_launch,
                                                "config": {"image": "local/sleeper",
                                                           "init": {"exec": program},
                                                           **config}})
    assert created.status_code == 200, created.text
    machine_id = str(created.json()["id"])
    if not skip_launch:
        await wait(api, machine_id, "started")
    return machine_id


async def wait(api: httpx.AsyncClient, machine_id: str, state: str) -> None:
    answer = await api.get(f"/machines/{machine_id}/wait", params={"state": state,
                                                                    "timeout": 60})
    assert answer.status_code == 200, answer.text


async def states(api: httpx.AsyncClient, ids: dict[str, str]) -> dict[str, str]:
    by_id = {m["id"]: m["state"] for m in (await api.get("/machines")).json()}
    return {name: "resting" if name == "standby" and by_id.get(mid) in RESTING
            else str(by_id.get(mid)) for name, mid in ids.items()}


async def reasons(api: httpx.AsyncClient, machine_id: str) -> list[str]:
    events = (await api.get(f"/machines/{machine_id}/events")).json()
    return [f"{e['type']} {e['status']} {e['source']} {(e.get('request') or {}).get('reason')}"
            for e in events]


def programs(marker: str) -> dict[str, int]:
    """The machines' programs by machine name: python, the marker, the name."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
                if marker in argv[:-1] and argv[0] == machine_python():
                    found[argv[argv.index(marker) + 1]] = int(entry.name)
    return found


async def settled(api: httpx.AsyncClient, ids: dict[str, str], marker: str) -> bool:
    """As ``CAME_BACK`` says, and exactly the started ones run a program."""
    running = {name for name, state in CAME_BACK.items() if state == "started"}
    return await states(api, ids) == CAME_BACK and set(programs(marker)) == running


async def cli(cluster: Cluster, *args: str) -> str:
    env = {**os.environ, "BODEGA_API_URL": f"http://127.0.0.1:{cluster.api}",
           "BODEGA_API_TOKEN": TOKEN}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", *args, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


def lose_the_host(up: UpProcess, marker: str) -> None:
    """SIGKILL every process of the cluster at once, as a host that loses power: the
    supervisor is held first (it would restart what dies), the machines' runs go whole
    (wrapper and program, their process group), then the supervisor."""
    assert up.process is not None
    os.kill(up.process.pid, signal.SIGSTOP)
    for component in up.state()["components"]:
        if component.get("pid"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(component["pid"]), signal.SIGKILL)
    for pid in programs(marker).values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    os.kill(up.process.pid, signal.SIGKILL)


async def test_started_machines_come_back_when_bodega_up_starts_again(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "cluster")
    marker = f"bodega-comeback-{uuid.uuid4().hex[:10]}"
    try:
        async with cluster.up() as (up, api):
            apps = await api.post(f"http://127.0.0.1:{cluster.api}/v1/apps",
                                  json={"app_name": APP, "org_slug": "personal"})
            assert apps.status_code == 201, apps.text
            ids = {"always": await create(api, "always", marker, restart={"policy": "always"}),
                   "default": await create(api, "default", marker),
                   "no": await create(api, "no", marker, restart={"policy": "no"}),
                   "user-stopped": await create(api, "user-stopped", marker,
                                                restart={"policy": "always"}),
                   "primary": await create(api, "primary", marker,
                                           restart={"policy": "always"})}
            ids["standby"] = await create(api, "standby", marker, skip_launch=True,
                                          restart={"policy": "always"},
                                          standbys=[ids["primary"]])
            stopped = await api.post(f"/machines/{ids['user-stopped']}/stop")
            assert stopped.status_code == 200, stopped.text
            await wait(api, ids["user-stopped"], "stopped")
            assert await up.stop() == 0  # Ctrl-C
        assert programs(marker) == {}

        async with cluster.up() as (up, api):
            await until(lambda: settled(api, ids, marker), what="machines back after Ctrl-C")
            always = await reasons(api, ids["always"])
            assert "start starting flyd host restarted" in always, always
            assert "stop stopping flyd host stopping" in always, always
            assert "start starting flyd host restarted" not in await reasons(api, ids["no"])
            assert "host restarted" in await cli(cluster, "machine", "events", ids["always"],
                                                 "--app", APP)
            lose_the_host(up, marker)
            await up.wait()

        async with cluster.up() as (up, api):
            await until(lambda: settled(api, ids, marker), what="machines back after SIGKILL")
            always = await reasons(api, ids["always"])
            assert always.count("start starting flyd host restarted") == 2, always
            running = programs(marker)
            assert up.process is not None
            up.process.send_signal(signal.SIGTERM)
            await up.wait()
        assert programs(marker) == running  # bodega stopped; its machines did not

        async with cluster.up() as (up, api):
            await until(lambda: settled(api, ids, marker), what="machines kept after SIGTERM")
            assert programs(marker) == running  # re-adopted, not started again
            assert await reasons(api, ids["always"]) == always
            assert up.process is not None
            up.process.send_signal(signal.SIGTERM)
            await up.wait()

        on_second = {name for name, mid in ids.items()
                     if (cluster.data_dir / "workers" / "ams-2" / "machines" / mid).exists()}
        assert on_second & set(running), "placement spread no started machine to ams-2"
        async with cluster.up("--workers-per-region", "1") as (up, api):
            assert programs(marker) == {name: pid for name, pid in running.items()
                                        if name not in on_second}
            assert await up.stop() == 0
        assert programs(marker) == {}
    finally:
        await unwire(cluster.data_dir)
