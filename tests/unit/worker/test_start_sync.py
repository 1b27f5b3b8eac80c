"""A start's spawn does not wait for the fsync of its record; its answer does. A create
is answered before the start it began performs anything.

A real worker (fake driver) on a real SQLite file; the fsync of the WAL is held back
by the test, to see what happens while the disk has not yet answered.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.store import database
from tests.poll_kit import until

W = tuple[Worker, FakeDriver]



async def test_a_start_spawns_while_its_record_is_fsynced_and_answers_once_on_disk(
        worker: W, monkeypatch: pytest.MonkeyPatch) -> None:
    w, driver = worker
    config = MachineConfig.model_validate({"image": "app:1",
                                           "guest": {"cpus": 1, "memory_mb": 256}})
    machine, _ = await w.machines.creation.create(CreateMachineBody(app="web", config=config,
                                                                    skip_launch=True))
    disk = threading.Event()
    synced: list[Path] = []
    real = database._fsync

    def held(path: Path) -> None:
        disk.wait(10)
        real(path)
        synced.append(path)

    monkeypatch.setattr(database, "_fsync", held)
    start = asyncio.create_task(w.machines.start(machine.id))
    try:
        await until(lambda: ("start", machine.id) in driver.calls, every=0.005)  # spawned meanwhile
        assert not start.done()  # not answered: its record is not yet on disk
        assert synced == []
    finally:
        disk.set()
    await asyncio.wait_for(start, 10)
    assert [p.name for p in synced] == [f"{w.store.path.name}-wal"]


async def test_a_create_is_answered_before_its_first_effect_holds_the_loop(worker: W) -> None:
    """The create's caller (the API answering it) is woken before the operation it began
    performs any effect: the answer is not left waiting behind the start."""
    w, driver = worker
    config = MachineConfig.model_validate({"image": "app:1", "init": {"exec": ["app"]},
                                           "guest": {"cpus": 1, "memory_mb": 256}})
    machine, _ = await w.machines.creation.create(CreateMachineBody(app="web", config=config))
    assert driver.calls == []  # answered first
    await until(lambda: ("start", machine.id) in driver.calls, every=0.005)
