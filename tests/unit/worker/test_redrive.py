"""An operation whose drive fails unexpectedly is driven again, then recorded failed.

A store that refuses a write or an effect with a bug raises what the runner does not
expect; the machine must not be left in a transient state with its lock free, which a
stop or even a forced destroy refuses until the worker restarts."""

from __future__ import annotations

from bodega.model.errors import StorageFull
from bodega.worker.daemon import Worker
from bodega.worker.drivers.base import TaskHandle, TaskSpec
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.ops.lifecycle import Redrive
from tests.unit.worker.test_machines import create

W = tuple[Worker, FakeDriver]
QUICK = Redrive(tries=3, first=0.01, most=0.02)


def starts_failing(driver: FakeDriver, times: int,
                   error: Exception | None = None) -> list[int]:
    """Make the driver's next ``times`` starts raise ``error``, by default one it never
    raises."""
    start = driver.start
    calls: list[int] = []

    async def failing(spec: TaskSpec) -> TaskHandle:
        calls.append(spec.start_seq)
        if len(calls) <= times:
            raise error or RuntimeError("the disk is full")
        return await start(spec)

    driver.start = failing  # type: ignore[method-assign]
    return calls


async def test_a_drive_that_fails_once_is_driven_again_to_its_end(worker: W) -> None:
    w, driver = worker
    w.machines.lifecycle.redrive = QUICK
    calls = starts_failing(driver, times=1)
    mid = await create(w)
    assert w.machines.get(mid).state == "started"
    assert len(calls) == 2
    assert len(driver.running(mid)) == 1
    assert w.store.running_operations() == []


async def test_a_drive_that_keeps_failing_leaves_the_machine_failed_not_starting(
        worker: W) -> None:
    w, driver = worker
    w.machines.lifecycle.redrive = QUICK
    calls = starts_failing(driver, times=100)
    mid = await create(w)
    row = w.machines.get(mid)
    assert (row.state, row.holds_compute) == ("failed", False)
    assert len(calls) == QUICK.tries
    assert w.store.running_operations() == []
    last = w.store.events(mid, 1)[0]
    assert (last.type, last.status) == ("start", "failed")
    assert last.request is not None
    assert last.request.error == "the worker could not go on: the disk is full"
    # At rest, it takes what a failed machine takes: a destroy, without force.
    await w.machines.destroy(mid)
    await w.machines.settle()
    assert w.machines.get(mid).state == "destroyed"


async def test_a_full_disk_is_waited_out_however_many_tries_it_takes(worker: W) -> None:
    w, driver = worker
    w.machines.lifecycle.redrive = QUICK
    calls = starts_failing(driver, times=QUICK.tries * 2,
                           error=StorageFull("the worker's disk is full"))
    mid = await create(w)
    assert w.machines.get(mid).state == "started"
    assert len(calls) == QUICK.tries * 2 + 1


def test_the_pause_doubles_up_to_its_most() -> None:
    redrive = Redrive(tries=4, first=0.5, most=3.0)
    assert [redrive.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
