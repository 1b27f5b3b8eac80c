"""A slot machine found running after an upgrade whose program is an earlier version's slot
loop: it keeps the runs it held (written again in its own form, the loops' tests are in
``tests/integration/worker/test_slot_runner.py``) and gets no new task."""

from __future__ import annotations

from bodega.jobs.slots import LOOP, SLOT_KEY, loop_of, slot_config
from bodega.model.machine_config import Guest, Init, MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.jobs.runs import OWNER


def task() -> MachineConfig:
    return MachineConfig(image="process", init=Init(exec=["/bin/true"]),
                         guest=Guest(cpus=1, memory_mb=256))


async def test_a_slot_of_the_earlier_loop_gets_no_new_task(
        worker: tuple[Worker, FakeDriver]) -> None:
    w, _ = worker
    pool = w.jobs.runner.slots
    assert pool is not None
    current = slot_config("app", task())
    earlier = slot_config("app", task())
    assert earlier.init is not None
    earlier.init.exec = ["/bin/sh", "-c", "while read -r line; do :; done", "bodega-slot"]
    assert (loop_of(current), loop_of(earlier)) == (LOOP, 1)
    made = [(await w.machines.creation.create(
        CreateMachineBody(app="app", config=config), owner=OWNER))[0] for config in
        (current, earlier)]
    pool.recover()
    found = {slot.machine_id: slot for slot in pool.slots}
    key = (current.metadata or {})[SLOT_KEY]
    assert (found[made[0].id].loop, found[made[0].id].key) == (LOOP, key)
    # Under a shape no task has: never placed in, nor chosen at a submit; it goes once idle.
    assert (found[made[1].id].loop, found[made[1].id].key) == (1, f"{key}:loop1")
