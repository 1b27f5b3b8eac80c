"""Steps whose effect does nothing on this worker are joined to the next step's commit.

Real workers, real SQLite: the commits are counted from the connection's own statement
trace. The null driver makes no directories (prepare does nothing) and host networking
wires no namespace (attach does nothing): a create then ends in its own transaction.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bodega.model.machine_config import MachineConfig
from bodega.runtime.failpoints import Failpoints
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.daemon import Worker
from bodega.worker.drivers.null import NullDriver
from bodega.worker.host.network import HostNetwork

from .conftest import in_process_worker, worker_config

CONFIG = MachineConfig.model_validate({"image": "app:1", "guest": {"cpus": 1, "memory_mb": 256}})


class Commits:
    """Counts the COMMITs a worker's store runs."""

    def __init__(self, w: Worker) -> None:
        self.count = 0
        w.store.db.set_trace_callback(self._seen)

    def _seen(self, statement: str) -> None:
        self.count += statement.strip().upper() == "COMMIT"


@pytest.fixture
async def null_worker(tmp_path: Path) -> AsyncIterator[Worker]:
    w = Worker(worker_config(tmp_path, driver="null"), driver=NullDriver(),
               network=HostNetwork("127.0.0.1", ipaddress.ip_network("10.250.0.0/24")))
    await w.network.setup()
    await w.machines.recover()
    yield w
    await w.machines.settle()
    await w.machines.supervision.close()
    w.store.close()


def steps(w: Worker, machine_id: str, fsm: str) -> list[str]:
    return [e.step for e in w.store.history(machine_id) if e.fsm == fsm]


async def test_a_null_driver_create_ends_in_its_own_commit(null_worker: Worker) -> None:
    w = null_worker
    commits = Commits(w)
    row, _ = await w.machines.creation.create(CreateMachineBody(app="web", config=CONFIG,
                                                   skip_launch=True))
    op = w.store.last_operation(row.id)
    assert op is not None
    assert (op.fsm, op.step, op.status) == ("create_machine", "created", "done")
    assert not w.machines.lifecycle.background  # nothing left to drive after the answer
    await w.machines.settle()
    assert commits.count == 1
    # Every step is still in the log, and the machine's record is what the steps write.
    assert steps(w, row.id, "create_machine") == ["attach_network", "prepare", "created"]
    current = w.machines.get(row.id)
    assert (current.state, current.private_ip, current.netns) == ("created", "127.0.0.1", None)
    assert [(e.type, e.status) for e in w.store.events(row.id)] == [("launch", "created")]


async def test_a_launched_null_machine_still_starts(null_worker: Worker) -> None:
    w = null_worker
    row, _ = await w.machines.creation.create(CreateMachineBody(app="web", config=CONFIG))
    await w.machines.settle()
    current = w.machines.get(row.id)
    assert current.state == "started"
    assert current.handle is not None
    assert steps(w, row.id, "start_machine") == ["starting", "spawn", "started"]
    assert [(e.type, e.status) for e in w.store.events(row.id)] == [
        ("start", "started"), ("start", "starting"), ("launch", "created")]


async def test_a_driver_that_prepares_keeps_its_prepare_step(tmp_path: Path) -> None:
    async with in_process_worker(worker_config(tmp_path)) as (w, driver):
        commits = Commits(w)
        row, _ = await w.machines.creation.create(CreateMachineBody(app="web", config=CONFIG,
                                                                    skip_launch=True))
        await w.machines.settle()
        assert ("prepare", row.id) in driver.calls
        # The create's commit (attaching joined to it: host networking), then prepare's.
        assert commits.count == 2
        assert steps(w, row.id, "create_machine") == ["attach_network", "prepare", "created"]


async def test_an_armed_failpoint_keeps_its_step_apart(tmp_path: Path) -> None:
    # A crash test that arms a failpoint at a no-op step must reach that instant, so that
    # step is performed and committed on its own.
    async with in_process_worker(worker_config(tmp_path)) as (w, _driver):
        reached = RecordedFailpoints(frozenset({("create_machine", "attach_network", "after")}))
        w.runner.failpoints = reached
        commits = Commits(w)
        await w.machines.creation.create(CreateMachineBody(app="web", config=CONFIG,
                                              skip_launch=True))
        await w.machines.settle()
        assert reached.hits == [("create_machine", "attach_network", "after")]
        assert commits.count == 3


@dataclass(frozen=True)
class RecordedFailpoints(Failpoints):
    """Armed failpoints that note being reached instead of killing the test's process."""

    hits: list[tuple[str, str, str]] = field(default_factory=list)

    def hit(self, fsm: str, step: str, when: str) -> None:
        if (fsm, step, when) in self.points:
            self.hits.append((fsm, step, when))
