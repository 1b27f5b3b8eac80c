"""``/wait`` wakes on every change of a machine, whatever made it (fake driver, no sockets)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bodega.model.errors import NotFound
from bodega.model.machine import ExitStatus
from bodega.model.machine_answers import WaitAnswer
from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.store.database import Store

W = tuple[Worker, FakeDriver]
# Far below the waits' own 30 s timeout: an answer this late came from a wake-up that was missed.
PROMPTLY = 5.0


async def started(w: Worker, **config: Any) -> str:
    cfg = MachineConfig.model_validate(
        {"image": "app:1", "guest": {"cpus": 1, "memory_mb": 256}, **config})
    row, _nonce = await w.machines.creation.create(
        CreateMachineBody(app="web", config=cfg))
    await w.machines.settle()
    assert w.machines.get(row.id).state == "started"
    return row.id


async def waiting(w: Worker, mid: str, *states: str,
                  from_event_id: str | None = None) -> asyncio.Task[WaitAnswer]:
    task = asyncio.create_task(w.actions.wait(mid, list(states), 30, None, from_event_id))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not task.done(), "the wait answered before anything changed"
    return task


async def test_an_exit_with_restart_policy_no_wakes_a_wait_for_stopped(worker: W) -> None:
    w, driver = worker
    mid = await started(w, restart={"policy": "no"})
    wait = await waiting(w, mid, "stopped")
    driver.exit(mid, ExitStatus(exit_code=3))
    answer = await asyncio.wait_for(wait, PROMPTLY)
    assert answer.state == "stopped"
    assert w.machines.get(mid).last_exit == ExitStatus(exit_code=3)


async def test_a_crash_and_restart_wake_a_wait_for_the_next_start(worker: W) -> None:
    w, driver = worker
    mid = await started(w, restart={"policy": "always"})
    latest = w.store.events(mid, 1)[0].id
    wait = await waiting(w, mid, "started", from_event_id=latest)
    driver.exit(mid, ExitStatus(exit_code=1))
    answer = await asyncio.wait_for(wait, PROMPTLY)
    assert answer.state == "started"
    assert answer.event_id is not None
    assert answer.event_id > latest
    assert w.machines.get(mid).restarts == 1


async def test_auto_destroy_answers_a_wait_for_destroyed_and_fails_one_for_stopped(
    worker: W,
) -> None:
    w, driver = worker
    mid = await started(w, restart={"policy": "no"}, auto_destroy=True)
    for_destroyed = await waiting(w, mid, "destroyed")
    for_stopped = await waiting(w, mid, "stopped")
    driver.exit(mid, ExitStatus(exit_code=0))
    assert (await asyncio.wait_for(for_destroyed, PROMPTLY)).state == "destroyed"
    with pytest.raises(NotFound, match="was destroyed"):
        await asyncio.wait_for(for_stopped, PROMPTLY)


async def test_a_destroy_answers_a_wait_for_another_state_at_once(worker: W) -> None:
    w, _driver = worker
    mid = await started(w)
    for_settled = await waiting(w, mid, "stopped", "suspended")
    await w.machines.destroy(mid, force=True)
    with pytest.raises(NotFound, match="was destroyed"):
        await asyncio.wait_for(for_settled, PROMPTLY)


def test_the_store_reports_each_resource_a_commit_touched_and_none_rolled_back(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "worker.db")
    seen: list[str] = []
    store.on_commit(seen.append)
    with store.tx() as conn:
        store.append(conn, op_id="a", resource_id="m1", fsm="action", step="x", payload={})
        store.append(conn, op_id="a", resource_id="m1", fsm="action", step="y", payload={})
        store.append(conn, op_id="b", resource_id="m2", fsm="action", step="x", payload={})
        assert seen == []  # nobody hears of a change before it is committed
    assert sorted(seen) == ["m1", "m2"]
    seen.clear()

    def rolled_back() -> None:
        with store.tx() as conn:
            store.append(conn, op_id="c", resource_id="m3", fsm="action", step="x", payload={})
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        rolled_back()
    with store.tx() as conn:
        store.append(conn, op_id="d", resource_id="m4", fsm="action", step="x", payload={})
    assert seen == ["m4"]
    store.close()
