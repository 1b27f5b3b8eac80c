"""A worker nobody can reach, as every reader shows it: `bodega deploy` of examples/hello on a
real `bodega up` (two workers), SIGSTOP of a machine's worker, then the API's list and get,
`bodega status`, `bodega machine list` and `bodega cluster members` all say its host is
unreachable and none shows its check passing; SIGCONT, and all say ok again."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.deploy_kit import Cli, app_dir, readable_dir, until, up_cluster

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


async def test_a_frozen_worker_is_unreachable_everywhere_and_ok_again_when_it_resumes(
        tmp_path: Path) -> None:
    app = f"far-{os.getpid() % 10000}"
    with readable_dir() as apps:
        async with up_cluster(tmp_path) as (cli, up):
            await cli.ok("deploy", "-c", str(app_dir(apps, "hello", app)))
            machine = await until(lambda: _checked(cli, app), timeout=120)
            worker = (await cli.json("machine", "explain", machine["id"], "--app", app)
                      )["winner"]["worker"]
            victim = int(next(c for c in up.state()["components"]
                              if c["name"] == worker)["pid"])
            os.kill(victim, signal.SIGSTOP)  # frozen: nothing restarts it, nothing answers
            try:
                await _unreachable(cli, app, machine["id"], worker)
            finally:
                os.kill(victim, signal.SIGCONT)
            await until(lambda: _back(cli, app, machine["id"], worker), timeout=120)


async def _checked(cli: Cli, app: str) -> dict[str, Any] | None:
    """A started machine of the app whose checks all pass, once one has."""
    for m in await cli.machines(app):
        checks = m.get("checks") or []
        if m["state"] == "started" and checks and all(c["status"] == "passing"
                                                      for c in checks):
            return m
    return None


async def _unreachable(cli: Cli, app: str, machine_id: str, worker: str) -> None:
    async def listed() -> dict[str, Any] | None:
        found = {m["id"]: m for m in await cli.machines(app)}[machine_id]
        return found if found["host_status"] == "unreachable" else None

    found = await until(listed, timeout=60)
    assert found["state"] == "started"  # the worker's last word, not a guess
    assert {c["status"] for c in found["checks"]} == {"unknown"}, found["checks"]
    assert all("last reported passing" in c["output"] for c in found["checks"])

    got = await cli.json("machine", "status", machine_id, "--app", app)
    assert (got["state"], got["host_status"]) == ("started", "unreachable")
    assert "passing" not in {c["status"] for c in got.get("checks") or []}

    status = await cli.json("status", "--app", app)
    (shown,) = [m for m in status["machines"] if m["id"] == machine_id]
    assert (shown["state"], shown["host_status"]) == ("started", "unreachable")
    assert {c["status"] for c in shown["checks"]} == {"unknown"}
    line = _line(await cli.ok("status", "--app", app), machine_id)
    assert "started (host unreachable)" in line
    assert "=unknown" in line
    assert "=passing" not in line
    assert "started (host unreachable)" in _line(
        await cli.ok("machine", "list", "--app", app), machine_id)

    members = {m["name"]: m for m in await cli.json("cluster", "members")}
    assert members[worker]["status"] in ("suspect", "dead"), members[worker]
    assert members[worker]["host_status"] == "unreachable"
    assert members[worker]["since"]
    assert "unreachable (" in _line(await cli.ok("cluster", "members"), worker)


async def _back(cli: Cli, app: str, machine_id: str, worker: str) -> bool:
    found = {m["id"]: m for m in await cli.machines(app)}[machine_id]
    if found["host_status"] != "ok" or {c["status"] for c in found["checks"]} != {"passing"}:
        return False
    got = await cli.json("machine", "status", machine_id, "--app", app)
    members = {m["name"]: m for m in await cli.json("cluster", "members")}
    line = _line(await cli.ok("status", "--app", app), machine_id)
    return (got["host_status"] == "ok" and members[worker]["host_status"] == "ok"
            and members[worker]["status"] == "alive" and "host unreachable" not in line
            and "=passing" in line)


def _line(text: str, name: str) -> str:
    (line,) = [x for x in text.splitlines() if name in x]
    return line
