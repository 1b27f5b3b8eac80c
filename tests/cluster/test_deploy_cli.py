"""`bodega deploy`, `releases`, `rollback` and `status`, the real command on a real `bodega up`.

One cluster (two workers in ams, process driver) and examples/hello:
a first deploy makes two machines on different workers; a rolling deploy
under constant load through the proxy serves no failed request; a version
that cannot start, or whose health check fails, stops the rolling deploy
after its first machine and leaves the other on the old release; a rollback
brings the old config back;
bluegreen succeeds, and a failing bluegreen leaves blue serving; a rollback replaces
only the machines not on the target release's config, and an unchanged redeploy
restarts nothing (``--json`` prints one event a line and a final result); a failing
check is printed as it turns critical, before the deploy ends; a deploy to a region the
cluster does not have, or of machines no worker has room for, is refused before it makes
anything; a program not found is named on the deploy's error line, in ``machine status``
and in the app's logs. Apps deployed alongside each other (a
deploy mostly waits): the rolling deploy and the release that cannot start; the release
whose checks fail; bluegreen; the unchanged redeploy; the refused deploys.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.deploy_kit import (
    SMOKE_CATCHES_AN_EXIT,
    Cli,
    app_dir,
    concurrently,
    load,
    readable_dir,
    releases_of,
    up_cluster,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

BROKEN = "app = \"{python} -c 'import sys; print(\\\"boom\\\"); sys.exit(3)'\""


async def test_deploy_rolling_failure_rollback_and_bluegreen(tmp_path: Path) -> None:
    suffix = os.getpid() % 10000
    async with up_cluster(tmp_path) as (cli, _up):
        with readable_dir() as apps:
            await concurrently(
                rolling_failure_rollback=rolling_failure_rollback(cli, apps, f"hello-{suffix}"),
                unhealthy_and_rollback=unhealthy_and_rollback(cli, apps, f"sick-{suffix}"),
                bluegreen=bluegreen(cli, apps, f"green-{suffix}"),
                unchanged=unchanged_redeploy(cli, apps, f"same-{suffix}"),
                refused=refused_deploys(cli, apps, f"where-{suffix}"))


def broken_app(tmp_path: Path, app: str) -> Path:
    """A release of hello whose program exits at once with code 3."""
    return app_dir(tmp_path, "hello", app,
                   **{'app = "python3 app.py"': BROKEN.format(python="python3")})


async def rolling_failure_rollback(cli: Cli, tmp_path: Path, app: str) -> None:
    v1 = app_dir(tmp_path, "hello", app)
    await cli.ok("deploy", "-c", str(v1))
    machines = await cli.machines(app)
    assert [m["state"] for m in machines] == ["started", "started"]
    assert releases_of(machines) == ["1", "1"]
    placements = [await cli.json("machine", "explain", m["id"], "--app", app)
                  for m in machines]
    assert len({p["winner"]["worker"] for p in placements}) == 2, \
        f"HA: different workers; placements: {placements}"
    assert (await cli.get(app)).text.startswith("hello from bodega")

    # Rolling, under load: no failed request.
    v2 = app_dir(tmp_path, "hello", app, **{"hello from bodega": "hello v2"})
    stop = asyncio.Event()
    traffic = asyncio.create_task(load(cli, app, stop))
    await cli.ok("deploy", "-c", str(v2))
    await asyncio.sleep(1)
    stop.set()
    count, failures = await traffic
    assert count > 50
    assert failures == []
    assert releases_of(await cli.machines(app)) == ["2", "2"]
    assert (await cli.get(app)).text.startswith("hello v2")

    # A version that cannot start: stops after the first machine, the rest stay on v2.
    ids = sorted(m["id"] for m in await cli.machines(app))
    code, _out, err = await cli.run("deploy", "-c", str(broken_app(tmp_path, app)),
                                    *SMOKE_CATCHES_AN_EXIT)
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line.startswith(f"Error: release v3 failed: machine {ids[0]} failed at ")
    assert "exit code 3" in line
    assert line.endswith(f"not updated: {ids[1]}")
    after = {m["id"]: m for m in await cli.machines(app)}
    assert after[ids[1]]["config"]["metadata"]["fly_release_version"] == "2"
    assert after[ids[1]]["state"] == "started"
    assert (await cli.get(app)).text.startswith("hello v2")  # still served by the other
    releases = await cli.json("releases", "--app", app)
    assert [(r["version"], r["status"]) for r in releases] == [
        (3, "failed"), (2, "complete"), (1, "complete")]
    assert ids[0] in releases[0]["failure"]

    # Back to v2 explicitly, as v4: both machines healthy on v2's config, the crashed one
    # too, whether it is between restarts or has run out of them and rests as "stopped".
    # Only the crashed one is replaced: the other still runs v2's config, untouched.
    before_rollback = await runs(cli, app)
    out = await cli.ok("rollback", "--app", app, "2")
    assert "ams: 1 machine already current, skipped" in out
    machines = await cli.machines(app)
    assert [m["state"] for m in machines] == ["started", "started"]
    assert releases_of(machines) == ["4", "4"]
    assert {m["config"]["env"]["GREETING"] for m in machines} == {"hello v2"}
    runs_after = await runs(cli, app)
    assert runs_after[ids[1]] == before_rollback[ids[1]], "the machine on v2 was restarted"
    assert runs_after[ids[0]] != before_rollback[ids[0]]


async def runs(cli: Cli, app: str) -> dict[str, tuple[str, int]]:
    """Each machine's instance and how many times it started: a restart changes one."""
    out = {}
    for m in await cli.machines(app):
        events = await cli.json("machine", "events", m["id"], "--app", app)
        out[m["id"]] = (m["instance_id"], sum(1 for e in events if e["type"] == "start"))
    return out


async def unhealthy_and_rollback(cli: Cli, tmp_path: Path, app: str) -> None:
    await cli.ok("deploy", "-c", str(app_dir(tmp_path, "hello", app)))
    ids = sorted(m["id"] for m in await cli.machines(app))
    # A version whose health check fails: stops after the first machine's checks, and says
    # the check turned critical as it happens, not when the wait runs out.
    unhealthy = app_dir(tmp_path, "hello", app, **{'HEALTHY = "true"': 'HEALTHY = "false"'})
    turned = f"{ids[0]} check servicecheck-00-http-8080 warning -> critical"
    code, out, err, early = await cli.watch("deploy", "-c", str(unhealthy), "--wait-timeout",
                                            "10", until=turned)
    assert turned in out, out
    assert early, "the transition was printed only once the deploy had ended"
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line.startswith(f"Error: release v2 failed: machine {ids[0]} failed at health "
                           "checks: not passing after 10s: servicecheck-00-http-8080 is "
                           "critical")
    assert line.endswith(f"not updated: {ids[1]}")
    after = {m["id"]: m for m in await cli.machines(app)}
    assert after[ids[0]]["config"]["metadata"]["fly_release_version"] == "2"
    assert after[ids[1]]["config"]["metadata"]["fly_release_version"] == "1"
    assert [c["status"] for c in after[ids[1]]["checks"]] == ["passing"]
    for _ in range(20):  # the proxy routes around the failing machine
        assert (await cli.get(app)).text.startswith(f"hello from bodega ({ids[1]})")

    # Rollback: the last complete release before the newest (v1), as v3; only the machine
    # on the failed v2 is replaced.
    before_rollback = await runs(cli, app)
    await cli.ok("rollback", "--app", app)
    machines = await cli.machines(app)
    assert releases_of(machines) == ["3", "3"]
    runs_after = await runs(cli, app)
    assert runs_after[ids[1]] == before_rollback[ids[1]]
    assert runs_after[ids[0]] != before_rollback[ids[0]]
    assert {m["config"]["env"]["HEALTHY"] for m in machines} == {"true"}
    releases = await cli.json("releases", "--app", app)
    assert (releases[0]["version"], releases[0]["status"]) == (3, "complete")
    assert releases[0]["description"] == "rollback to v1"


async def bluegreen(cli: Cli, tmp_path: Path, app: str) -> None:
    await cli.ok("deploy", "-c", str(app_dir(tmp_path, "hello", app)))
    ids = sorted(m["id"] for m in await cli.machines(app))
    assert len(ids) == 2

    # Bluegreen: a green machine per blue, then blue destroyed.
    green_toml = app_dir(tmp_path, "hello", app, **{"hello from bodega": "hello green"})
    await cli.ok("deploy", "-c", str(green_toml), "--strategy", "bluegreen")
    machines = await cli.machines(app)
    assert len(machines) == 2
    assert not {m["id"] for m in machines} & set(ids)
    assert (await cli.get(app)).text.startswith("hello green")

    # A failing bluegreen destroys every green machine and leaves blue serving.
    blue = sorted(m["id"] for m in machines)
    code, _out, err = await cli.run("deploy", "-c", str(broken_app(tmp_path, app)),
                                    "--strategy", "bluegreen", *SMOKE_CATCHES_AN_EXIT)
    assert code == 1
    assert "failed at" in err
    machines = await cli.machines(app)
    assert sorted(m["id"] for m in machines) == blue
    assert {m["state"] for m in machines} == {"started"}
    assert (await cli.get(app)).text.startswith("hello green")

    status = await cli.json("status", "--app", app)
    assert status["release"]["version"] == 2  # the failed v3 changed nothing
    assert len(status["machines"]) == 2


async def unchanged_redeploy(cli: Cli, tmp_path: Path, app: str) -> None:
    toml = app_dir(tmp_path, "hello", app)
    await cli.ok("deploy", "-c", str(toml))
    before = await runs(cli, app)

    # The same config again, with --json: every line a JSON object, the last the result.
    code, out, err = await cli.run("deploy", "-c", str(toml.parent), "--json")
    assert code == 0, err
    lines: list[dict[str, Any]] = [json.loads(line) for line in out.splitlines()]
    *events, result = lines
    assert events
    assert {e["type"] for e in events} <= {"progress", "check"}
    assert (result["type"], result["release"], result["version"], result["status"]) == (
        "result", "v2", 2, "complete")
    assert result["failure"] is None
    assert sorted((m["id"], m["action"], m["relabelled"]) for m in result["machines"]) == [
        (machine_id, "skipped", True) for machine_id in sorted(before)]
    assert await runs(cli, app) == before, "an unchanged deploy restarted a machine"
    assert releases_of(await cli.machines(app)) == ["2", "2"]  # labelled in place

    # As a person reads it.
    out = await cli.ok("deploy", "-c", str(toml))
    assert "app: ams: 2 machines already current, skipped" in out
    assert "2 machines already current, nothing restarted" in out
    assert await runs(cli, app) == before

    # A failing deploy with --json: the failure in the result, the exit code as without.
    broken = broken_app(tmp_path, app)
    code, out, _err = await cli.run("deploy", "-c", str(broken), "--json",
                                    *SMOKE_CATCHES_AN_EXIT)
    assert code == 1
    result = json.loads(out.splitlines()[-1])
    assert (result["status"], result["version"]) == ("failed", 4)
    assert result["failure"]["machine"] == min(before)
    assert result["failure"]["step"] in ("start", "smoke check")
    assert "exit code 3" in result["failure"]["reason"]


async def refused_deploys(cli: Cli, tmp_path: Path, app: str) -> None:
    """A deploy that cannot place its machines says why in one line and makes nothing: no
    app, no release. One whose program is not found says so on its error line, in
    ``machine status`` and in ``bodega logs``."""
    named = ("invalid_argument: region xyz has no workers in this cluster; its region is ams")
    code, _out, err = await cli.run("machine", "run", "--app", app, "--region", "xyz",
                                    "--", "sleep", "60")
    assert code == 1
    assert "app not found" in err  # no app yet: that is said first

    # An unknown region, a size no worker has room for, a size no machine may have.
    nowhere = app_dir(tmp_path, "hello", app, **{'primary_region = "ams"':
                                                 'primary_region = "xyz"'})
    too_big = app_dir(tmp_path, "hello", app)
    too_big.write_text(too_big.read_text() + '\n[[vm]]\n  memory = "8gb"\n')
    absurd = app_dir(tmp_path, "hello", app)
    absurd.write_text(absurd.read_text() + '\n[[vm]]\n  memory = "1024gb"\n')
    for toml, said in ((nowhere, f"Error: {named}"),
                       (too_big, "Error: insufficient capacity in ams: the deploy creates 2 "
                                 "machines of 1 shared cpu, 8192 MB and none fits; nothing "
                                 "was created"),
                       (absurd, "Error: process group 'app': invalid_argument: guest.memory_mb")):
        code, _out, err = await cli.run("deploy", "-c", str(toml))
        (line,) = err.strip().splitlines()
        assert (code, line.startswith(said)) == (1, True), err
        assert app not in {a["name"] for a in await cli.json("apps", "list")}

    await cli.ok("apps", "create", app)
    code, _out, err = await cli.run("machine", "run", "--app", app, "--region", "xyz",
                                    "--", "sleep", "60")
    assert (code, err.strip()) == (1, f"Error: {named}")
    code, _out, err = await cli.run("deploy", "-c", str(nowhere))
    assert (code, err.strip()) == (1, f"Error: {named}")
    assert await cli.json("releases", "-a", app) == []  # refused before it was recorded

    # A program that is not found: the machine fails at its first step, and says why.
    missing = app_dir(tmp_path, "hello", app, **{'app = "python3 app.py"':
                                                 'app = "nosuchprogram --port 8080"'})
    code, _out, err = await cli.run("deploy", "-c", str(missing))
    cause = "exec: nosuchprogram: not found in PATH"
    (line,) = err.strip().splitlines()
    assert code == 1
    assert line.startswith("Error: release v1 failed: machine ")
    assert f"failed at start: {cause}" in line
    failed = line.split()[5]  # "Error: release v1 failed: machine <id> failed at start"
    assert failed in {m["id"] for m in await cli.machines(app)}
    status = await cli.ok("machine", "status", failed, "--app", app)
    (reason,) = [row for row in status.splitlines() if row.startswith("reason")]
    assert cause in reason
    assert cause in await cli.ok("logs", "-a", app)

    # Its only release failed: the app says so, and has no current release.
    (listed,) = [a for a in await cli.json("apps", "list") if a["name"] == app]
    assert listed["status"] == "failed"
    table = await cli.ok("apps", "list")
    (row,) = [line.split() for line in table.splitlines() if line.startswith(app + " ")]
    assert row[2:4] == ["failed", "-"]
