"""``/wait`` on a real worker answers when a program ends by itself, not at its own timeout.

Job-like clients run a command, wait for the machine to stop and read the exit code. The
program here waits for a file the test creates once the wait is in flight, then exits 3.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bodega.model.errors import NotFound
from bodega.model.machine_answers import WaitAnswer
from bodega.wire.internal.worker_client import WorkerClient

from .crash_kit import CrashWorker, crash_worker

WAIT_TIMEOUT = 30  # what the client asks for
PROMPTLY = 10.0  # what the test allows: well under WAIT_TIMEOUT, generous on a busy host
JOB = ["/bin/sh", "-c", "while [ ! -e go ]; do sleep 0.05; done; exit 3"]

pytestmark = pytest.mark.skipif(not Path("/proc/self/ns/net").exists(), reason="needs Linux")


async def _job(worker: CrashWorker, client: WorkerClient, **extra: Any) -> str:
    config = {"image": "local/job", "init": {"exec": JOB}, "guest": {"cpus": 1, "memory_mb": 256},
              "restart": {"policy": "no"}, **extra}
    machine = await client.create_machine({"app": "jobs", "config": config})
    await client.wait(machine.id, "started", timeout=WAIT_TIMEOUT)
    return str(machine.id)


async def _in_flight(client: WorkerClient, mid: str, state: str) -> asyncio.Task[WaitAnswer]:
    task = asyncio.create_task(client.wait(mid, state, timeout=WAIT_TIMEOUT))
    await asyncio.sleep(1.0)  # let the request reach the worker and start waiting
    assert not task.done(), "the wait answered before the program ended"
    return task


def _let_it_end(worker: CrashWorker, mid: str) -> None:
    (worker.tmp / worker.name / "machines" / mid / "root" / "go").touch()


async def test_a_wait_for_stopped_answers_when_the_program_exits(tmp_path: Path) -> None:
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        mid = await _job(worker, client)
        wait = await _in_flight(client, mid, "stopped")
        _let_it_end(worker, mid)
        answer = await asyncio.wait_for(wait, PROMPTLY)
        assert answer.state == "stopped"
        events = await client.call("GET", mid, "events")
        exits = [e for e in events if e["type"] == "exit"]
        assert exits[0]["request"]["exit_event"]["exit_code"] == 3
        assert exits[0]["request"]["exit_event"]["requested_stop"] is False


async def test_waits_on_an_auto_destroyed_machine_answer_when_it_is_destroyed(
    tmp_path: Path,
) -> None:
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        mid = await _job(worker, client, auto_destroy=True)
        for_destroyed = await _in_flight(client, mid, "destroyed")
        for_stopped = await _in_flight(client, mid, "stopped")
        _let_it_end(worker, mid)
        answer = await asyncio.wait_for(for_destroyed, PROMPTLY)
        assert answer.state == "destroyed"
        with pytest.raises(NotFound, match="was destroyed"):
            await asyncio.wait_for(for_stopped, PROMPTLY)
