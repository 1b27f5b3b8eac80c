"""`bodega up`: one registry agent for the host (the default), the query API on it.

A real local cluster (null driver, two workers) whose workers, broker and proxy
read the agent's replica; the real `bodega` command for queries and watches. The
agent is killed with SIGKILL: `bodega up` starts it again, nothing the workers
wrote is lost, and a watch resumed with ``--id --from`` gets the change made
while it was away. With `--no-registry-agent`, every process keeps a replica of
its own, as before.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.cluster.deploy_kit import Cli
from tests.cluster.up_kit import UpProcess, free_port
from tests.poll_kit import until

BILLION = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
           "WHERE x < 1000000000) SELECT count(*) FROM c")


def cli_of(up: UpProcess) -> Cli:
    return Cli({**os.environ, "BODEGA_API_URL": up.state()["api_url"],
                "BODEGA_API_TOKEN": up.token()}, up.state()["proxy_url"])


async def error(cli: Cli, *args: str) -> str:
    """The one line a refused command prints."""
    code, out, err = await cli.run(*args)
    assert code == 1, f"bodega {' '.join(args)}: {code}\n{out}\n{err}"
    (line,) = err.strip().splitlines()
    return line


pytestmark = pytest.mark.asyncio(loop_scope="module")
SMALL = ("--regions", "ams", "--workers-per-region", "2", "--driver", "null",
         "--worker-cpus", "2", "--worker-memory-mb", "2048", "--proxy-tls-port", "0",
         "--registry-port", "0", "--no-private-network")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UpProcess]:
    data = tmp_path_factory.mktemp("agent") / "cluster"
    cluster = UpProcess(
        data, *SMALL, "--api-port", str(free_port()), "--proxy-port", str(free_port()),
        "--log-level", "info")
    await cluster.start()
    try:
        await cluster.until_line("bodega is up", timeout=300)
        yield cluster
    finally:
        await cluster.stop()


def agent_pid(up: UpProcess) -> int | None:
    (agent,) = [c for c in up.state()["components"] if c["role"] == "agent"]
    pid = agent.get("pid")
    return int(pid) if pid else None


async def machines(cli: Cli) -> dict[str, str]:
    out = await cli.ok("query", "--json", "SELECT id, state FROM machines WHERE app = 'q'")
    return {row["id"]: row["state"] for row in map(json.loads, out.splitlines())}


async def test_one_agent_replicates_for_the_host_and_answers_sql(up: UpProcess) -> None:
    roles = [c["role"] for c in up.state()["components"]]
    assert roles.count("agent") == 1
    data = up.data_dir
    # The workers keep no replica of their own: a store of the rows they write.
    for worker in (data / "workers").iterdir():
        assert (worker / "registry" / "own.db").exists()
        assert not (worker / "registry" / "registry.db").exists()
    cli = cli_of(up)
    await cli.ok("apps", "create", "q")
    made = json.loads(await cli.ok("machine", "run", "-a", "q", "--json", "--", "sleep", "1"))
    assert (await machines(cli))[made["id"]] == "started"
    members = json.loads(await cli.ok("cluster", "members", "--json"))
    assert {m["name"]: m["role"] for m in members}["agent"] == "agent"
    # The agent is the host's one SWIM member: the others are its tenants, at its address.
    (agent,) = [m for m in members if m["name"] == "agent"]
    assert agent["host"] == ""
    tenants = [m for m in members if m["name"] != "agent"]
    assert sorted(m["name"] for m in tenants) == ["ams-1", "ams-2", "broker", "proxy"]
    assert {(m["host"], m["addr"], m["status"]) for m in tenants} == {
        ("agent", agent["addr"], "alive")}
    assert "via agent" in await cli.ok("cluster", "members")

    assert "read-only" in await error(cli, "query", "DELETE FROM machines")
    assert "syntax error" in await error(cli, "query", "SELEC 1")
    assert "no such table: nope" in await error(cli, "query", "SELECT * FROM nope")
    assert "time limit" in await error(cli, "query", BILLION)


async def test_a_killed_agent_comes_back_with_every_row_and_a_watch_resumes(
        up: UpProcess) -> None:
    cli = cli_of(up)
    code, _, _ = await cli.run("apps", "create", "q")
    assert code in (0, 1)  # made by the test before, or now
    first = json.loads(await cli.ok("machine", "run", "-a", "q", "--json", "--", "sleep", "1"))
    # A watch, as a user runs it: rows, then changes; Ctrl-C says how to resume.
    watch = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "watch", "SELECT id, state FROM machines WHERE app = 'q'",
        env=cli.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert watch.stderr is not None
    said = (await asyncio.wait_for(watch.stderr.readline(), 60)).decode()
    assert said.startswith("subscription "), said
    watch.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(watch.communicate(), 30)
    resume = err.decode().strip().splitlines()[-1].split("resume with: bodega ")[1].split()
    assert resume[:2] == ["watch", "--id"]

    before = agent_pid(up)
    assert before is not None
    os.kill(before, signal.SIGKILL)
    await cli.ok("machine", "stop", "-a", "q", first["id"])  # its worker writes meanwhile
    second = json.loads(await cli.ok("machine", "run", "-a", "q", "--json", "--", "sleep", "1"))
    await until(lambda: agent_pid(up) not in (None, before), timeout=120)

    async def settled() -> bool:
        found = await machines(cli)
        return found.get(first["id"]) == "stopped" and found.get(second["id"]) == "started"
    for _ in range(300):
        if await settled():
            break
        await asyncio.sleep(0.2)
    assert await settled()

    resumed = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", *resume, "--json", env=cli.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert resumed.stdout is not None
    changed: dict[str, object] = {}
    while changed.get(first["id"]) != "stopped" or second["id"] not in changed:
        line = json.loads(await asyncio.wait_for(resumed.stdout.readline(), 60))
        if "change" in line:
            _kind, _n, values, _cid = line["change"]
            changed[values[0]] = values[1]
    resumed.send_signal(signal.SIGINT)
    await asyncio.wait_for(resumed.wait(), 30)


async def test_without_an_agent_every_process_keeps_a_replica_of_its_own(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("replicas") / "cluster"
    up = UpProcess(data, "--no-registry-agent", *SMALL, "--api-port", str(free_port()),
                   "--proxy-port", str(free_port()), "--log-level", "warning")
    await up.start()
    try:
        await up.until_line("bodega is up", timeout=300)
        roles = sorted(c["role"] for c in up.state()["components"] if c["role"] != "metrics-store")
        assert roles == ["broker", "proxy", "worker", "worker"]
        assert not (data / "agent").exists()
        for worker in (data / "workers").iterdir():
            assert (worker / "registry" / "registry.db").exists()
        cli = cli_of(up)
        await cli.ok("apps", "create", "own")
        members = json.loads(await cli.ok("cluster", "members", "--json"))
        # Each one serves sync to its peers: each holds the whole view.
        assert sorted((m["role"], bool(m["meta"].get("sync"))) for m in members) == [
            ("broker", True), ("proxy", True), ("worker", True), ("worker", True)]
        listed = json.loads(await cli.ok("apps", "list", "--json"))
        assert "own" in json.dumps(listed)
    finally:
        await up.stop()
