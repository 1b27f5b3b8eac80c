"""A machine's lines keep the time they were written across its stop, the worker's
restart and its next start: the stop's line is not dated by the next run's.

A real process-driver worker stopped with ``--stop-machines-on-exit`` (what ``bodega
up`` asks): the machine prints its stop line as the worker stops it, the worker starts
again and the machine is started at once. The test asserts only order: the stop's line
dated before the worker was started again, the next run's lines after.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.python_kit import machine_python
from tests.tls_kit import TEST_CA

from .crash_kit import CrashWorker, crash_worker, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the process driver's netns needs root")

SERVE = ("import signal, sys, time\n"
         "def stop(*_):\n"
         "    print('stopping', flush=True); sys.exit(0)\n"
         "signal.signal(signal.SIGINT, stop)\n"
         "signal.signal(signal.SIGTERM, stop)\n"
         "print('listening', flush=True)\n"
         "while True: time.sleep(1)\n")


async def dated_lines(worker: CrashWorker, machine_id: str) -> list[tuple[float, str]]:
    """The machine's log as the worker's API serves it: (when written, line)."""
    assert worker.daemon is not None
    async with TEST_CA.http(base_url=worker.daemon.url, timeout=30) as api:
        answer = await api.get(f"/v1/machines/{machine_id}/logs")
    assert answer.status_code == 200, answer.text
    return [(datetime.fromisoformat(x["timestamp"]).timestamp(), x["message"])
            for x in map(json.loads, filter(None, answer.text.splitlines()))]


async def test_the_stop_line_keeps_its_time_across_a_worker_restart(tmp_path: Path) -> None:
    async with crash_worker(tmp_path) as worker:
        client = await worker.start(extra=("--stop-machines-on-exit",))
        machine = await client.create_machine({"app": "times", "config": {
            "image": "local/serve", "init": {"exec": [machine_python(), "-c", SERVE]},
            "guest": {"cpus": 1, "memory_mb": 128}}})
        await worker.reached(machine.id, "started")

        async def printed(count: int) -> bool:
            return [m for _, m in await dated_lines(worker, machine.id)].count(
                "listening") >= count

        await until(lambda: printed(1))
        assert worker.daemon is not None
        assert worker.daemon.process is not None
        worker.daemon.process.terminate()  # stops the machine: it prints "stopping"
        assert await worker.crashed(timeout=60) == 0
        restarted_at = time.time()
        client = await worker.start(extra=("--stop-machines-on-exit",))
        await client.start(machine.id)
        await worker.reached(machine.id, "started")
        await until(lambda: printed(2))

        lines = await dated_lines(worker, machine.id)
        assert [m for _, m in lines] == ["listening", "stopping", "listening"], lines
        (first, _), (stopped, _), (again, _) = lines
        assert first <= stopped < restarted_at, lines
        assert again > restarted_at, lines
