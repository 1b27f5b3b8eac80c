"""Machines come back with their worker (fake driver, real SQLite): after the host's
graceful stop, after a host that went down, and after a crash at the worst instants."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bodega.model.capacity import Totals
from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.config import WorkerConfig
from bodega.worker.core.policy import HOST_RESTARTED, HOST_STOPPING
from bodega.worker.daemon import Worker
from bodega.worker.drivers.base import TaskHandle, TaskSpec
from bodega.worker.drivers.fake import FakeDriver

from .conftest import in_process_worker, make_worker, worker_config


async def create(w: Worker, name: str, skip_launch: bool = False, **config: Any) -> str:
    cfg = MachineConfig.model_validate(
        {"image": "app:1", "guest": {"cpus": 1, "memory_mb": 128}, **config})
    row, _nonce = await w.machines.creation.create(
        CreateMachineBody(app="web", config=cfg, name=name, skip_launch=skip_launch))
    await w.machines.settle()
    return row.id


async def fleet(w: Worker) -> dict[str, str]:
    """One machine of each kind the host's return must tell apart, by name."""
    ids = {
        "always": await create(w, "always", restart={"policy": "always"}),
        "default": await create(w, "default"),  # on-failure
        "no": await create(w, "no", restart={"policy": "no"}),
        "user-stopped": await create(w, "user-stopped", restart={"policy": "always"}),
    }
    ids["standby"] = await create(w, "standby", skip_launch=True,
                                  restart={"policy": "always"}, standbys=[ids["always"]])
    await w.machines.stop(ids["user-stopped"])
    await w.machines.settle()
    return ids


def roomy(tmp_path: Path) -> WorkerConfig:
    """A worker with room for the fleet, whatever it holds."""
    return worker_config(tmp_path, totals=Totals(cpus=8, memory_mb=4096, disk_gb=10))


def states(w: Worker, ids: dict[str, str]) -> dict[str, str]:
    return {name: w.machines.get(mid).state for name, mid in ids.items()}


def reasons(w: Worker, machine_id: str) -> list[tuple[str, str, str, str | None]]:
    """The machine's events, oldest first, with the reason each gives."""
    return [(e.type, e.status, e.source, e.reason())
            for e in reversed(w.actions.events(machine_id, limit=50))]


CAME_BACK = {"always": "started", "default": "started", "no": "stopped",
             "user-stopped": "stopped", "standby": "created"}


async def test_what_the_hosts_graceful_stop_stopped_started_comes_back(tmp_path: Path) -> None:
    config = roomy(tmp_path)
    async with in_process_worker(config) as (w, _driver):
        ids = await fleet(w)
        await w.stop_all_machines()
        assert set(states(w, ids).values()) == {"stopped", "created"}
        assert ("stop", "stopping", "flyd", HOST_STOPPING) in reasons(w, ids["always"])
    async with in_process_worker(config) as (w, driver):
        await w.machines.settle()
        assert states(w, ids) == CAME_BACK
        assert reasons(w, ids["always"])[-2:] == [("start", "starting", "flyd", HOST_RESTARTED),
                                                 ("start", "started", "flyd", HOST_RESTARTED)]
        assert [c for c in driver.calls if c[0] == "start"] == [
            ("start", ids["always"]), ("start", ids["default"])]
        assert not any(w.machines.get(mid).host_stopped for mid in ids.values())


async def test_runs_lost_with_their_host_come_back_unless_policy_no(tmp_path: Path) -> None:
    config = roomy(tmp_path)
    async with in_process_worker(config) as (w, _driver):
        ids = await fleet(w)
        await w.machines.start(ids["standby"])  # a standby that had taken over, say
        await w.machines.settle()
        # The host goes: no stop, and the next worker's driver knows none of these runs.
    async with in_process_worker(config) as (w, _driver):
        await w.machines.settle()
        assert states(w, ids) == {**CAME_BACK, "standby": "stopped"}
        events = reasons(w, ids["always"])
        assert events[-3:] == [("exit", "restarting", "flyd", None),
                               ("start", "starting", "flyd", HOST_RESTARTED),
                               ("start", "started", "flyd", HOST_RESTARTED)]
        assert w.machines.get(ids["default"]).restarts == 0  # not a crash of its own
        assert reasons(w, ids["no"])[-1] == ("exit", "stopped", "flyd", None)


class StuckDriver(FakeDriver):
    """A fake whose stops, or starts, never end: the worker is killed in their middle."""

    def __init__(self, stuck: str, earlier: FakeDriver | None = None) -> None:
        super().__init__()
        self.stuck = stuck
        if earlier is not None:  # its runs outlived the worker before: they are re-adopted
            self.tasks = earlier.tasks

    async def stop(self, handle: TaskHandle, signal: int, timeout: float) -> None:
        if self.stuck == "stop":
            await asyncio.Event().wait()
        await super().stop(handle, signal, timeout)

    async def start(self, spec: TaskSpec) -> TaskHandle:
        if self.stuck == "start" and spec.start_seq > 1:  # a launch goes through
            await asyncio.Event().wait()
        return await super().start(spec)


@contextlib.asynccontextmanager
async def killed_worker(config: WorkerConfig, stuck: str,
                        earlier: FakeDriver | None = None) -> AsyncIterator[Worker]:
    """A worker whose process dies on the way out: nothing is settled or driven further."""
    w, _fake = make_worker(config)
    w.driver = w.effects.driver = w.machines.driver = StuckDriver(stuck, earlier)
    w.machines.supervision.driver = w.driver
    await w.network.setup()
    await w.machines.recover()
    yield w
    for task in list(w.machines.lifecycle.background):
        task.cancel()
    await asyncio.gather(*w.machines.lifecycle.background, return_exceptions=True)
    await w.machines.supervision.close()
    w.store.close()


async def test_a_crash_in_the_middle_of_the_hosts_stop_still_brings_it_back(
        tmp_path: Path) -> None:
    config = roomy(tmp_path)
    async with in_process_worker(config) as (w, driver):
        mid = await create(w, "always", restart={"policy": "always"})
    async with killed_worker(config, "stop", earlier=driver) as w:
        await w.machines.host_stop(mid, timeout=5.0)
        assert w.machines.get(mid).state == "stopping"
    async with in_process_worker(config) as (w, _driver):  # the stop ends, then it returns
        await w.machines.settle()
        assert w.machines.get(mid).state == "started"
        assert [r for r in reasons(w, mid) if r[3] == HOST_RESTARTED] == [
            ("start", "starting", "flyd", HOST_RESTARTED),
            ("start", "started", "flyd", HOST_RESTARTED)]


async def test_a_crash_once_the_return_is_recorded_starts_it_once(tmp_path: Path) -> None:
    config = roomy(tmp_path)
    async with in_process_worker(config) as (w, _driver):
        mid = await create(w, "always", restart={"policy": "always"})
        await w.stop_all_machines()
    async with killed_worker(config, "start") as w:  # the return's start never spawns
        assert w.machines.get(mid).state == "starting"
        assert not w.machines.get(mid).host_stopped
    async with in_process_worker(config) as (w, driver):
        await w.machines.settle()
        row = w.machines.get(mid)
        assert (row.state, row.start_seq) == ("started", 2)
        assert [c for c in driver.calls if c[0] == "start"] == [("start", mid)]
        assert [r for r in reasons(w, mid) if r[3] == HOST_RESTARTED] == [
            ("start", "starting", "flyd", HOST_RESTARTED),
            ("start", "started", "flyd", HOST_RESTARTED)]
