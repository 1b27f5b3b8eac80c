"""A worker killed while machines run: they are re-adopted; exits while it was down count."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from .crash_kit import crash_worker, machine_config, program_pids, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the process driver test needs root")


async def test_running_machines_are_readopted_after_kill_9(tmp_path: Path) -> None:
    marker = f"bodega-crash-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        machine = await client.create_machine({"app": "a", "config": machine_config(marker)})
        await client.wait(machine.id, "started", timeout=30)
        await until(lambda: len(program_pids(marker)) == 1)
        (pid,) = program_pids(marker)
        assert worker.daemon is not None
        await worker.daemon.kill9()
        assert program_pids(marker) == [pid]  # the worker's death did not touch the machine
        client = await worker.start()
        again = await client.machine(machine.id)
        assert again.state == "started"
        assert program_pids(marker) == [pid]
        events = await client.call("GET", machine.id, "events")
        assert [e["type"] for e in events].count("start") == 2  # starting + started, once
        await client.stop(machine.id, signal="SIGTERM")
        await client.wait(machine.id, "stopped", timeout=30)
        exit_event = (await client.call("GET", machine.id, "events"))[0]
        assert exit_event["request"]["exit_event"]["exit_code"] == 143
        assert program_pids(marker) == []


async def test_an_exit_while_the_worker_is_down_follows_the_restart_policy(
    tmp_path: Path,
) -> None:
    marker = f"bodega-crash-{uuid.uuid4().hex[:12]}"
    # Relative to the machine's own directory: it runs as an unprivileged user.
    code = ("import os, time\nwhile not os.path.exists('exit-now'): time.sleep(0.05)\n"
            "os.remove('exit-now')\nraise SystemExit(3)")
    config = machine_config(marker, restart={"policy": "on-failure", "max_retries": 1})
    config["init"] = {"exec": [config["init"]["exec"][0], "-c", code, marker]}
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        machine = await client.create_machine({"app": "a", "config": config})
        mid = machine.id
        flag = worker.tmp / worker.name / "machines" / mid / "root" / "exit-now"
        await client.wait(mid, "started", timeout=30)
        await until(lambda: len(program_pids(marker)) == 1)
        assert worker.daemon is not None
        await worker.daemon.kill9()
        flag.touch()
        await until(lambda: program_pids(marker) == [])
        client = await worker.start()
        await until(lambda: len(program_pids(marker)) == 1)
        events = await client.call("GET", mid, "events")
        exits = [e for e in events if e["type"] == "exit"]
        assert exits[0]["status"] == "restarting"
        assert exits[0]["request"]["exit_event"]["exit_code"] == 3
        await client.wait(mid, "started", timeout=30)
        flag.touch()
        await client.wait(mid, "stopped", timeout=30)  # max_retries 1: the second exit stops it
