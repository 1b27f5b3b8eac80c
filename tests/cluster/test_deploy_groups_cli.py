"""`bodega deploy` of a group without services (a standby), leases, canary, scale and launch,
the real command on a real `bodega up` (two workers in ams, process driver)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from bodega.deploy.core.config import load
from tests.cluster.deploy_kit import (
    SMOKE_CATCHES_AN_EXIT,
    Cli,
    app_dir,
    concurrently,
    readable_dir,
    releases_of,
    up_cluster,
)

RESTING = ("created", "stopped")  # a standby is created without being started
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


async def test_standby_lease_canary_scale_and_launch(tmp_path: Path) -> None:
    suffix = os.getpid() % 10000
    async with up_cluster(tmp_path) as (cli, _up):
        with readable_dir() as apps:
            # Two apps and a command that needs no cluster, at once: each mostly waits.
            await concurrently(standby_and_lease=standby_and_lease(cli, apps, f"ticker-{suffix}"),
                               canary_and_scale=canary_and_scale(cli, apps, f"web-{suffix}"),
                               launch=launch(tmp_path))


async def standby_and_lease(cli: Cli, apps: Path, app: str) -> None:
    toml = app_dir(apps, "worker", app)
    await cli.ok("deploy", "-c", str(toml))
    machines = await cli.machines(app)
    started = [m for m in machines if m["state"] == "started"]
    stopped = [m for m in machines if m["state"] in RESTING]
    assert len(started) == 1
    assert len(stopped) == 1
    (primary,), (standby,) = started, stopped
    assert standby["config"]["standbys"] == [primary["id"]]
    where = {m["id"]: (await cli.json("machine", "explain", m["id"], "--app", app))
             ["winner"]["worker"] for m in machines}
    assert where[primary["id"]] != where[standby["id"]], "the standby is on another worker"
    status = await cli.json("status", "--app", app)
    assert {m["process_group"] for m in status["machines"]} == {"worker"}

    # Someone else holds a lease on the primary: the deploy stops before changing anything.
    async with httpx.AsyncClient(base_url=cli.env["BODEGA_API_URL"], timeout=30, headers={
            "authorization": f"Bearer {cli.env['BODEGA_API_TOKEN']}"}) as api:
        held = await api.post(f"/v1/apps/{app}/machines/{primary['id']}/lease",
                              json={"ttl": 120})
        assert held.status_code == 201, held.text
        code, _out, err = await cli.run("deploy", "-c", str(toml))
        assert code == 1
        assert f"machine {primary['id']} failed at lease: leased by someone else" in err
        assert releases_of(await cli.machines(app)) == ["1", "1"]
        nonce = held.json()["data"]["nonce"]
        await api.delete(f"/v1/apps/{app}/machines/{primary['id']}/lease",
                         headers={"fly-machine-lease-nonce": nonce})
    # A second deploy keeps the standby a standby (stopped, naming the same primary).
    await cli.ok("deploy", "-c", str(toml))
    after = {m["id"]: m for m in await cli.machines(app)}
    assert after[standby["id"]]["state"] in RESTING
    assert after[standby["id"]]["config"]["standbys"] == [primary["id"]]
    assert releases_of(list(after.values())) == ["3", "3"]


async def canary_and_scale(cli: Cli, apps: Path, app: str) -> None:
    await cli.ok("deploy", "-c", str(app_dir(apps, "hello", app)), "--no-ha")
    (only,) = await cli.machines(app)

    # A failing canary is destroyed and nothing else changes.
    broken = app_dir(apps, "hello", app, **{'app = "python3 app.py"':
                                            'app = "python3 -c \'raise SystemExit(4)\'"'})
    code, _out, err = await cli.run("deploy", "-c", str(broken), "--strategy", "canary",
                                    *SMOKE_CATCHES_AN_EXIT)
    assert code == 1
    assert "exit code 4" in err
    machines = await cli.machines(app)
    assert [m["id"] for m in machines] == [only["id"]]
    assert releases_of(machines) == ["1"]

    await cli.ok("deploy", "-c", str(app_dir(apps, "hello", app,
                                              **{"hello from bodega": "canaried"})),
                 "--strategy", "canary")
    machines = await cli.machines(app)
    assert [m["id"] for m in machines] == [only["id"]]
    assert (await cli.get(app)).text.startswith("canaried")

    await cli.ok("scale", "count", "3", "--app", app)
    machines = await cli.machines(app)
    assert len(machines) == 3
    assert {m["state"] for m in machines} == {"started"}
    # A region the cluster does not have: named, with the one it has; nothing changes.
    code, _out, err = await cli.run("scale", "count", "2", "--app", app, "--region", "ams,syd")
    assert (code, err.strip()) == (1, "Error: invalid_argument: region syd has no workers in "
                                      "this cluster; its region is ams")
    assert len(await cli.machines(app)) == 3
    await cli.ok("scale", "count", "2", "--app", app, "--region", "ams")
    assert len(await cli.machines(app)) == 2

    await crash_to_rest(cli, app, machines[0]["id"])
    await cli.ok("scale", "vm", "shared-cpu-2x", "--app", app)
    machines = await cli.machines(app)
    assert {m["config"]["guest"]["memory_mb"] for m in machines} == {512}
    assert {m["state"] for m in machines} == {"started"}  # the crashed one too


async def crash_to_rest(cli: Cli, app: str, machine_id: str) -> None:
    """Leave a machine stopped by its own crash: no restart policy, then SIGKILL."""
    async with httpx.AsyncClient(base_url=cli.env["BODEGA_API_URL"], timeout=90, headers={
            "authorization": f"Bearer {cli.env['BODEGA_API_TOKEN']}"}) as api:
        path = f"/v1/apps/{app}/machines/{machine_id}"
        config = (await api.get(path)).json()["config"]
        updated = await api.post(path, json={"config": {**config, "restart": {"policy": "no"}}})
        assert updated.status_code == 200, updated.text
        for state in ("started", "stopped"):
            if state == "stopped":
                signalled = await api.post(f"{path}/signal", json={"signal": "SIGKILL"})
                assert signalled.status_code == 200, signalled.text
            waited = await api.get(f"{path}/wait", params={
                "state": state, "timeout": 60, "instance_id": updated.json()["instance_id"]})
            assert waited.status_code == 200, waited.text
        newest = (await api.get(f"{path}/events", params={"limit": 1})).json()
        assert newest[0]["type"] == "exit", newest


async def launch(tmp: Path) -> None:
    cli = Cli(env=dict(os.environ), proxy="")
    target = tmp / "launched" / "bodega.toml"
    target.parent.mkdir()
    await cli.ok("launch", "--name", "fresh", "-c", str(target), "--", "python3", "app.py")
    text = target.read_text()
    assert 'app = "fresh"' in text
    assert 'app = "python3 app.py"' in text
    config, warnings = load(target)
    assert (config.app, config.processes, warnings) == ("fresh", {"app": "python3 app.py"}, [])
    code, _out, err = await cli.run("launch", "-c", str(target), "--", "x")
    assert code == 1
    assert err.strip() == f"Error: {target} exists; edit it, or pass -c for another file"
