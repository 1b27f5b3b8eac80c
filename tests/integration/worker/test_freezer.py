"""The process driver's freezer on real v1 cgroups: a suspend that finds the machine's
cgroups still empty (its wrapper spawned, not yet joined) waits for the join and freezes
what joins; one whose machine never gets a process says so, within its bound."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import uuid
from collections.abc import Iterator

import pytest

import bodega.worker.drivers.process.freezer as freezer_module
from bodega.worker.core.records import TaskHandle
from bodega.worker.drivers.base import DriverError
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.freezer import CgroupFreezer
from tests.freezer_kit import FREEZER, frozen

pytestmark = pytest.mark.skipif(
    Cgroups.detect("probe") is None or not FREEZER.is_dir(),
    reason="needs root, v1 memory cgroups and the v1 freezer")


@pytest.fixture
def machine() -> Iterator[tuple[Cgroups, str]]:
    cgroups = Cgroups.detect(f"freezer-test-{uuid.uuid4().hex[:8]}")
    assert cgroups is not None
    machine_id = f"m{uuid.uuid4().hex[:12]}"
    cgroups.create(machine_id, 64, None)
    yield cgroups, machine_id
    cgroups.kill_all(machine_id)
    for _ in range(100):
        if cgroups.remove(machine_id):
            break
        subprocess.run(["sleep", "0.02"], check=True)
    for path in [*cgroups.dirs(machine_id), cgroups.freezer_dir(machine_id)]:
        assert path is not None
        with contextlib.suppress(FileNotFoundError):  # never made when nothing froze
            path.parent.rmdir()  # the test's scope directory


def handle(machine_id: str, pid: int) -> TaskHandle:
    return TaskHandle(driver="process", machine_id=machine_id, instance_id="i", start_seq=1,
                      pid=pid)


async def test_a_suspend_before_the_wrapper_joins_waits_for_it_and_freezes_it(
        machine: tuple[Cgroups, str]) -> None:
    cgroups, machine_id = machine
    process = subprocess.Popen(["sleep", "60"])
    try:
        suspend = asyncio.create_task(CgroupFreezer(cgroups).suspend(
            handle(machine_id, process.pid)))
        await asyncio.sleep(0.2)
        assert not suspend.done()  # nothing to freeze yet: it waits, it does not refuse
        for procs in cgroups.procs_files(machine_id):  # what the wrapper does first
            procs.write_text(f"{process.pid}\n")
        await asyncio.wait_for(suspend, 10)
        assert frozen(process.pid)
        await CgroupFreezer(cgroups).resume(handle(machine_id, process.pid))
        assert not frozen(process.pid)
    finally:
        process.kill()
        process.wait()


async def test_a_suspend_of_a_machine_that_never_gets_a_process_fails_within_its_bound(
        machine: tuple[Cgroups, str], monkeypatch: pytest.MonkeyPatch) -> None:
    cgroups, machine_id = machine
    monkeypatch.setattr(freezer_module, "JOIN_TIMEOUT", 0.3)
    with pytest.raises(DriverError, match="has no process to suspend within"):
        await CgroupFreezer(cgroups).suspend(handle(machine_id, 999_999))
