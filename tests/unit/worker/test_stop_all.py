"""Stopping every machine before the worker exits (fake driver): no lease or policy survives."""

from __future__ import annotations

import asyncio

from bodega.model.machine import ExitStatus
from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.core.policy import restart_delay
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.store import queries

W = tuple[Worker, FakeDriver]
RESTARTS = 16  # a crash loop this long waits BACKOFF_CAP (10 s) before its next start


async def started(w: Worker, name: str, **config: object) -> str:
    cfg = MachineConfig.model_validate(
        {"image": "app:1", "guest": {"cpus": 1, "memory_mb": 256}, **config})
    row, _nonce = await w.machines.creation.create(
        CreateMachineBody(app="web", config=cfg, name=name))
    await w.machines.settle()
    assert w.machines.get(row.id).state == "started"
    return row.id


async def test_a_leased_machine_is_stopped_too(worker: W) -> None:
    w, driver = worker
    mid = await started(w, "leased")
    w.actions.acquire_lease(mid, ttl=600, description="", owner="someone", nonce=None)
    await w.stop_all_machines()
    assert w.machines.get(mid).state == "stopped"
    assert driver.running(mid) == []
    assert w.actions.lease(mid).nonce  # the lease is the holder's business; only the run ends


async def test_a_machine_waiting_out_its_restart_backoff_is_stopped(worker: W) -> None:
    w, driver = worker
    mid = await started(w, "looping", restart={"policy": "always"})
    driver.exit(mid, ExitStatus(exit_code=1))
    for _ in range(100):  # until the exit is recorded and the restart waits out its backoff
        if w.machines.get(mid).state != "started":
            break
        await asyncio.sleep(0)
    assert w.machines.get(mid).state == "starting"
    await w.stop_all_machines()
    row = w.machines.get(mid)
    assert row.state == "stopped"
    assert driver.running(mid) == []


async def test_an_exit_while_draining_is_not_restarted(worker: W) -> None:
    w, driver = worker
    mid = await started(w, "always", restart={"policy": "always"})
    w.machines.drain()
    driver.exit(mid, ExitStatus(exit_code=1))
    await w.machines.settle()
    row = w.machines.get(mid)
    assert (row.state, row.restarts, row.start_seq) == ("stopped", 0, 1)
    assert driver.running(mid) == []


async def test_a_long_restart_backoff_does_not_hold_up_the_exit(worker: W) -> None:
    w, driver = worker
    mid = await started(w, "backing-off", restart={"policy": "always"})
    with w.store.tx() as conn:  # many recent crashes: the next restart waits the longest
        queries.update_machine(conn, mid, w.store.clock(), restarts=RESTARTS)
    driver.exit(mid, ExitStatus(exit_code=1))
    for _ in range(100):
        if w.machines.get(mid).state != "started":
            break
        await asyncio.sleep(0)
    # Bounded well below the backoff: the stop must cut the wait short, not sit it out.
    await asyncio.wait_for(w.stop_all_machines(), restart_delay(RESTARTS) * 0.8)
    assert w.machines.get(mid).state == "stopped"
    assert driver.running(mid) == []
