"""A standby taking over after its primary's worker is killed: `bodega deploy` of
examples/worker on a real `bodega up` (two workers in ams), kill -9 of the primary's
worker, and the standby started, as the public API shows it."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.deploy_kit import Cli, app_dir, cluster, readable_dir, until
from tests.cluster.up_process import UpProcess

RESTING = ("created", "stopped")
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


async def test_a_standby_takes_over_when_its_primarys_worker_is_killed(tmp_path: Path) -> None:
    app = f"standby-{os.getpid() % 10000}"
    # The app's files stay until the end: the standby reads worker.py when it starts.
    with readable_dir() as apps:
        async with cluster(tmp_path) as (cli, up):
            await cli.ok("deploy", "-c", str(app_dir(apps, "worker", app)))
            await takeover(cli, up, app)


async def takeover(cli: Cli, up: UpProcess, app: str) -> None:
    machines = await cli.machines(app)
    (primary,) = [m for m in machines if m["state"] == "started"]
    (standby,) = [m for m in machines if m["state"] in RESTING]
    assert standby["config"]["standbys"] == [primary["id"]]
    worker = (await cli.json("machine", "explain", primary["id"], "--app", app)
              )["winner"]["worker"]
    victim = next(c for c in up.state()["components"] if c["name"] == worker)

    async with httpx.AsyncClient(base_url=cli.env["BODEGA_API_URL"], timeout=30, headers={
            "authorization": f"Bearer {cli.env['BODEGA_API_TOKEN']}"}) as api:

        async def standby_state() -> Any:
            got = await api.get(f"/v1/apps/{app}/machines/{standby['id']}")
            assert got.status_code == 200, got.text
            return got.json()["state"]

        # Nothing happens while the primary's worker is up.
        assert await standby_state() in RESTING
        # The supervisor would restart the worker within a second and the primary
        # would be re-adopted; held still, it leaves the worker dead as a lost host.
        assert up.process is not None
        os.kill(up.process.pid, signal.SIGSTOP)
        try:
            os.kill(int(victim["pid"]), signal.SIGKILL)
            await until(lambda: _is(standby_state, "started"), timeout=180, every=1.0)
        finally:
            os.kill(up.process.pid, signal.SIGCONT)
        # Started for good, not crash-looping through starting.
        await asyncio.sleep(5)
        assert await standby_state() == "started"
    await until(lambda: _logged(up, f"standby {standby['id']} on "), timeout=60)
    assert f"took over for machine {primary['id']} of app {app}: worker {worker} is " \
        in _broker_log(up)


async def _is(read: Any, state: str) -> bool:
    return bool(await read() == state)


def _broker_log(up: UpProcess) -> str:
    logs = sorted((up.data_dir / "logs").glob("broker*.log"))
    return "".join(p.read_text(errors="replace") for p in logs)


async def _logged(up: UpProcess, text: str) -> bool:
    return text in _broker_log(up)
