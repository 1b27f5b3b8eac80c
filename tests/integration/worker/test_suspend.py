"""Machine suspend through a real worker's API, with the process driver and the cgroup freezer.

A suspended machine's process is still there, frozen (its counter stands
still); a start resumes the same process with its memory (the counter goes
on from where it stood, not from zero); stop and destroy of a suspended
machine thaw it so it can take its signal; a worker killed with the machine
suspended, or in the middle of suspending it, comes back to a suspended
machine whose process is the same.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from bodega.model.errors import BadRequest, Conflict, PreconditionFailed
from bodega.wire.internal.worker_client import WorkerClient
from tests.freezer_kit import frozen
from tests.leftovers_kit import names_of
from tests.python_kit import machine_python

from ..daemon_kit import running_worker_daemon
from .crash_kit import CrashWorker, crash_worker, machine_config, program_pids, until

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/sys/fs/cgroup/freezer").is_dir(),
    reason="suspend with the process driver needs root and the cgroup v1 freezer")

# Counts in memory and writes the count each tick: a resumed process goes on counting from
# where it stood; a restarted one would start again from 1.
COUNTER = ("import time\ni = 0\nwhile True:\n    i += 1\n"
           "    open('count.tmp', 'w').write(str(i))\n"
           "    __import__('os').replace('count.tmp', 'count')\n    time.sleep(0.02)")


def counter_config(marker: str) -> dict[str, Any]:
    config = machine_config(marker)
    config["init"] = {"exec": [machine_python(), "-c", COUNTER, marker]}
    return config


def count(worker: CrashWorker, machine_id: str) -> int:
    path = worker.tmp / worker.name / "machines" / machine_id / "root" / "count"
    try:
        return int(path.read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


async def started_counter(worker: CrashWorker, client: WorkerClient,
                          marker: str) -> tuple[str, int]:
    machine = await client.create_machine({"app": "a", "config": counter_config(marker)})
    await client.wait(machine.id, "started", timeout=30)
    await until(lambda: len(program_pids(marker)) == 1 and count(worker, machine.id) > 3)
    (pid,) = program_pids(marker)
    return machine.id, pid


async def suspended(worker: CrashWorker, mid: str, nonce: str | None = None) -> None:
    """Suspend ``mid`` and wait until it is (a failed wait shows its events and log)."""
    assert worker.client is not None
    await worker.client.suspend(mid, nonce=nonce)
    await worker.reached(mid, "suspended")


async def assert_still_frozen(worker: CrashWorker, mid: str, pid: int) -> int:
    assert frozen(pid)
    before = count(worker, mid)
    for _ in range(10):  # it ticks every 20 ms when it runs
        await asyncio.sleep(0.05)
        assert count(worker, mid) == before, "a suspended machine's process went on running"
    return before


async def test_suspend_freezes_and_start_resumes_the_same_process(tmp_path: Path) -> None:
    marker = f"bodega-suspend-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        mid, pid = await started_counter(worker, client, marker)
        await suspended(worker, mid)
        stood = await assert_still_frozen(worker, mid, pid)
        events = await client.call("GET", mid, "events")
        assert [(e["type"], e["status"]) for e in events[:2]] == [
            ("suspend", "suspended"), ("suspend", "suspending")]
        again = await client.suspend(mid)  # already suspended: nothing to do
        assert again.ok
        answer = await client.start(mid)
        assert answer.previous_state == "suspended"
        await client.wait(mid, "started", timeout=30)
        await until(lambda: count(worker, mid) > stood + 3)
        assert program_pids(marker) == [pid]  # the same process, not a new run
        assert not frozen(pid)
        machine = await client.machine(mid)
        assert machine.state == "started"
        events = await client.call("GET", mid, "events")
        assert [(e["type"], e["status"]) for e in events[:2]] == [
            ("start", "started"), ("start", "starting")]


async def test_a_machine_suspended_the_moment_it_is_started_is_suspended_and_resumes(
        tmp_path: Path) -> None:
    """Started is recorded once the wrapper is spawned, before it joins the machine's
    cgroups: a suspend sent at once still freezes the machine, and a start resumes it."""
    marker = f"bodega-suspend-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        machine = await client.create_machine({"app": "a", "config": counter_config(marker)})
        await client.wait(machine.id, "started", timeout=30)
        await suspended(worker, machine.id)
        await client.start(machine.id)
        await client.wait(machine.id, "started", timeout=30)
        await until(lambda: count(worker, machine.id) > 3)  # its program runs once thawed


async def test_stop_and_destroy_of_a_suspended_machine_thaw_it_first(tmp_path: Path) -> None:
    marker = f"bodega-suspend-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        mid, _pid = await started_counter(worker, client, marker)
        await suspended(worker, mid)
        await client.stop(mid, signal="SIGTERM", timeout="20s")
        await client.wait(mid, "stopped", timeout=30)
        exit_event = (await client.call("GET", mid, "events"))[0]
        assert exit_event["request"]["exit_event"]["exit_code"] == 143  # its SIGTERM, in time
        assert program_pids(marker) == []
        await client.start(mid)
        await client.wait(mid, "started", timeout=30)
        await until(lambda: len(program_pids(marker)) == 1)
        await suspended(worker, mid)
        await client.destroy(mid)  # not forced: a suspended machine may be destroyed
        await client.wait(mid, "destroyed", timeout=30)
        assert program_pids(marker) == []
        scope = names_of(worker.tmp / worker.name).cgroup_scope(worker.name)
        freezer = Path(f"/sys/fs/cgroup/freezer/bodega/{scope}/{mid}")
        assert not freezer.exists()


async def test_suspend_refusals_use_the_api_error_shape(tmp_path: Path) -> None:
    marker = f"bodega-suspend-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        mid, _pid = await started_counter(worker, client, marker)
        lease = await client.call("POST", mid, "lease", json={"ttl": 60})
        nonce = lease["data"]["nonce"]
        with pytest.raises(Conflict):
            await client.suspend(mid)  # leased: only the holder may suspend it
        await suspended(worker, mid, nonce)
        await client.stop(mid, nonce=nonce)
        await client.wait(mid, "stopped", timeout=30)
        with pytest.raises(PreconditionFailed) as refused:
            await client.suspend(mid, nonce=nonce)
        assert refused.value.status == "failed_precondition"
        assert "cannot suspend machine" in refused.value.message


async def test_a_driver_without_suspend_answers_400(tmp_path: Path) -> None:
    async with running_worker_daemon(tmp_path) as (_daemon, client):
        machine = await client.create_machine({"app": "a", "config": {"image": "x"}})
        await client.wait(machine.id, "started", timeout=30)
        with pytest.raises(BadRequest) as refused:
            await client.suspend(machine.id)
        assert refused.value.status == "unimplemented"
        assert "suspend is not supported" in refused.value.message


@pytest.mark.parametrize("failpoint", [None, "suspend_machine:suspending:before",
                                       "suspend_machine:suspending:after"])
async def test_a_worker_killed_with_a_machine_suspended_or_suspending_re_adopts_it(
    tmp_path: Path, failpoint: str | None,
) -> None:
    marker = f"bodega-suspend-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start(failpoints=failpoint)
        mid, pid = await started_counter(worker, client, marker)
        assert worker.daemon is not None
        if failpoint is None:
            await suspended(worker, mid)
            await worker.daemon.kill9()
        else:
            await client.suspend(mid)  # recorded; the worker dies at the failpoint
            await worker.crashed()
        assert program_pids(marker) == [pid]  # the worker's death did not touch the machine
        client = await worker.start()
        await client.wait(mid, "suspended", timeout=30)
        stood = await assert_still_frozen(worker, mid, pid)
        events = await client.call("GET", mid, "events")
        assert [e["status"] for e in events if e["type"] == "suspend"] == [
            "suspended", "suspending"]
        await client.start(mid)
        await client.wait(mid, "started", timeout=30)
        await until(lambda: count(worker, mid) > stood + 3)
        assert program_pids(marker) == [pid]


async def test_a_worker_stopping_its_machines_on_exit_stops_suspended_ones(
    tmp_path: Path,
) -> None:
    marker = f"bodega-suspend-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start(extra=("--stop-machines-on-exit",))
        mid, _pid = await started_counter(worker, client, marker)
        await suspended(worker, mid)
        assert worker.daemon is not None
        await worker.daemon.stop(timeout=60)
        assert worker.daemon.process is not None
        assert worker.daemon.process.returncode == 0  # it exited by itself, not killed
        assert program_pids(marker) == []  # thawed and stopped, not left frozen
