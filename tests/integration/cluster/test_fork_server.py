"""The fork server, for real: components forked from one interpreter that imported bodega.

Each test starts ``python -m bodega.cluster.forkserver`` through ``ForkServer.start``
and forks real bodega commands from it: ``--help`` and a bad command for exit
statuses and logs, and a registry agent (a daemon with a ready file, a keyring from
its environment and ``--exit-with-parent``) for signals, titles and who it stops with.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bodega.cluster.forked import (
    LOST,
    ForkedProcess,
    ForkServer,
    ForkUnavailable,
    environment_pipe,
)
from bodega.runtime.lifecycle import SUPERVISOR_PID
from tests.cluster.door_kit import memory_holds
from tests.keyring_kit import ENV
from tests.poll_kit import until
from tests.ports_kit import free_port

BODEGA = [sys.executable, "-m", "bodega"]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ForkServer]:
    started = await ForkServer.start(tmp_path / "fork-server.log", dict(os.environ))
    try:
        yield started
    finally:
        await started.stop()


async def spawn(server: ForkServer, args: list[str], log: Path,
                env: dict[str, str] | None = None) -> ForkedProcess:
    with log.open("ab") as out:
        return await server.spawn([*BODEGA, *args], env or dict(os.environ), log.parent,
                                  out.fileno())


def agent_args(root: Path) -> list[str]:
    return ["agent", "--name", "agent", "--region", "ams", "--data-dir", str(root / "agent"),
            "--listen", "127.0.0.1:0", "--gossip-listen", f"127.0.0.1:{free_port()}",
            "--internal-tls", "off", "--ready-file", str(root / "agent.json"),
            "--exit-with-parent"]


async def test_a_forked_command_writes_its_log_and_exits_with_its_own_status(
        server: ForkServer, tmp_path: Path) -> None:
    helped = await spawn(server, ["--help"], tmp_path / "help.log")
    refused = await spawn(server, ["no-such-command"], tmp_path / "refused.log")
    assert await helped.wait() == 0
    assert await refused.wait() == 2  # a usage error, as the same command line exits
    assert "agent" in (tmp_path / "help.log").read_text()  # the commands, listed
    assert "No such command" in (tmp_path / "refused.log").read_text()
    assert helped.returncode == 0


async def test_a_forked_daemon_is_its_command_line_with_its_environment(
        server: ForkServer, tmp_path: Path) -> None:
    secret = "fork-server-never-reads-this-" + os.urandom(8).hex()
    agent = await spawn(server, agent_args(tmp_path), tmp_path / "agent.log",
                        {**os.environ, **ENV, "BODEGA_TEST_SECRET": secret,
                         SUPERVISOR_PID: str(os.getpid())})
    ready = tmp_path / "agent.json"
    # It read its keyring from the environment it was given, or it would not be ready.
    await until(ready.exists, timeout=30)
    assert json.loads(ready.read_text())["pid"] == agent.pid
    title = Path(f"/proc/{agent.pid}/cmdline").read_bytes()
    assert title.startswith(f"{sys.executable} -m bodega agent --name agent".encode())
    assert memory_holds(agent.pid, (secret.encode(),)) == {secret.encode()}
    # The server passed the environment on unread: no later child inherits it.
    assert memory_holds(server.process.pid, (secret.encode(),)) == set()
    agent.send_signal(signal.SIGKILL)
    assert await agent.wait() == -signal.SIGKILL


async def test_a_forked_daemon_outlives_the_fork_server_and_stops_with_its_supervisor(
        server: ForkServer, tmp_path: Path) -> None:
    supervisor = await asyncio.create_subprocess_exec("sleep", "600")
    agent = await spawn(server, agent_args(tmp_path), tmp_path / "agent.log",
                        {**os.environ, **ENV, SUPERVISOR_PID: str(supervisor.pid)})
    await until((tmp_path / "agent.json").exists, timeout=30)
    server.process.kill()
    await server.process.wait()
    await until(lambda: not server.alive)
    with pytest.raises(ForkUnavailable):
        await spawn(server, ["--help"], tmp_path / "late.log")
    await asyncio.sleep(1.0)
    assert agent.returncode is None  # its parent is gone, its supervisor is not
    os.kill(agent.pid, 0)
    supervisor.kill()
    await supervisor.wait()
    # It stops by itself; with no fork server to say how it exited, its status is unknown.
    assert await asyncio.wait_for(agent.wait(), 30) == LOST
    assert "stopped" in (tmp_path / "agent.log").read_text()


async def test_only_bodega_commands_are_forked(server: ForkServer, tmp_path: Path) -> None:
    with (tmp_path / "x.log").open("ab") as out, pytest.raises(ForkUnavailable):
        await server.spawn(["/bin/true"], {}, tmp_path, out.fileno())
    helped = await spawn(server, ["--help"], tmp_path / "help.log")  # the server goes on
    assert await helped.wait() == 0


def test_an_environment_larger_than_a_pipe_still_travels_whole() -> None:
    env = {f"BODEGA_TEST_{index}": "x" * 1000 for index in range(200)}  # about 200 KB
    read = environment_pipe(env)
    with os.fdopen(read, "rb") as pipe:
        assert json.loads(pipe.read()) == env
