"""A standby taking over while its primary's worker is frozen, and giving the primary its
place back when the worker resumes: `bodega deploy` of examples/worker on a real
`bodega up` (two workers in ams), SIGSTOP of the primary's worker until the standby
starts, `bodega status` showing the primary's host unreachable, SIGCONT, and then
exactly one copy started, for good, as the CLI shows it."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.deploy_kit import Cli, app_dir, readable_dir, until, up_cluster
from tests.cluster.up_kit import UpProcess

RESTING = ("created", "stopped")
# Long enough to see a flap: the broker's settle time for a returning worker is 10 s,
# and its standby watch looks again every 5 s while anything is pending.
STEADY_LOOKS = 15
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


async def test_a_standby_takes_over_from_a_frozen_worker_and_gives_the_place_back(
        tmp_path: Path) -> None:
    app = f"standby-{os.getpid() % 10000}"
    # The app's files stay until the end: the standby reads worker.py when it starts.
    with readable_dir() as apps:
        async with up_cluster(tmp_path) as (cli, up):
            await cli.ok("deploy", "-c", str(app_dir(apps, "worker", app)))
            await takeover_and_back(cli, up, app)


async def takeover_and_back(cli: Cli, up: UpProcess, app: str) -> None:
    machines = await cli.machines(app)
    (primary,) = [m for m in machines if m["state"] == "started"]
    (standby,) = [m for m in machines if m["state"] in RESTING]
    assert standby["config"]["standbys"] == [primary["id"]]
    worker = (await cli.json("machine", "explain", primary["id"], "--app", app)
              )["winner"]["worker"]
    victim = int(next(c for c in up.state()["components"] if c["name"] == worker)["pid"])

    async def states() -> dict[str, str]:
        return {m["id"]: m["state"] for m in await cli.machines(app)}

    # Frozen, not killed: the primary's program keeps running on its host, as on a host
    # cut off from the others, and `bodega up` has nothing to restart.
    os.kill(victim, signal.SIGSTOP)
    try:
        await until(lambda: _is(states, standby["id"], "started"), timeout=120, every=1.0)
        status = await cli.json("status", "--app", app)
        hosts = {m["id"]: (m["state"], m["host_status"]) for m in status["machines"]}
        assert hosts == {primary["id"]: ("started", "unreachable"),
                         standby["id"]: ("started", "ok")}, status
        assert any(standby["id"] in w and "unreachable" in w for w in status["warnings"])
        text = await cli.ok("status", "--app", app)
        assert "started (host unreachable)" in text, text
        assert f"Warning: {primary['id']} and its standby {standby['id']} are both started" \
            in text, text
    finally:
        os.kill(victim, signal.SIGCONT)

    # Back: the primary, which never stopped, keeps its place; the standby rests again.
    one_copy = {primary["id"]: "started", standby["id"]: "stopped"}
    await until(lambda: _equals(states, one_copy), timeout=120, every=1.0)
    for _ in range(STEADY_LOOKS):  # and stays so: no flap back and forth
        assert await states() == one_copy
        await asyncio.sleep(1.0)
    status = await cli.json("status", "--app", app)
    assert status["warnings"] == []
    assert {m["host_status"] for m in status["machines"]} == {"ok"}

    log = _broker_log(up)
    assert f"standby {standby['id']} on " in log
    assert f"took over for machine {primary['id']} of app {app}: worker {worker} is " in log
    assert f"standby {standby['id']} of app {app} on " in log
    assert f"stopped: its primary {primary['id']} on worker {worker} is running again" in log


async def _is(read: Any, machine_id: str, state: str) -> bool:
    return bool((await read()).get(machine_id) == state)


async def _equals(read: Any, expected: dict[str, str]) -> bool:
    return bool(await read() == expected)


def _broker_log(up: UpProcess) -> str:
    logs = sorted((up.data_dir / "logs").glob("broker*.log"))
    return "".join(p.read_text(errors="replace") for p in logs)
