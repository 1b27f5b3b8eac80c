"""Which machines the health checks reconcile: started ones whose config names checks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest

from bodega.model.capacity import Totals
from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.ops.health import HealthChecks
from bodega.worker.store import queries
from tests.poll_kit import until as poll_until
from tests.unit.worker.conftest import in_process_worker, worker_config

W = tuple[Worker, FakeDriver]
TCP = {"type": "tcp", "port": 5432, "interval": "5s", "grace_period": "60s"}


@pytest.fixture
async def big(tmp_path: Path) -> AsyncIterator[W]:
    """A worker with room for every machine below."""
    async with in_process_worker(worker_config(
            tmp_path, totals=Totals(cpus=8, memory_mb=4096, disk_gb=10))) as pair:
        yield pair


async def create(w: Worker, skip_launch: bool = False, **config: object) -> str:
    cfg = MachineConfig.model_validate(
        {"image": "app:1", "guest": {"cpus": 1, "memory_mb": 128}, **config})
    row, _nonce = await w.machines.creation.create(
        CreateMachineBody(app="web", config=cfg, skip_launch=skip_launch))
    await w.machines.settle()
    return row.id


async def test_only_started_machines_with_checks_are_read_and_probed(big: W) -> None:
    w, _ = big
    top = await create(w, checks={"db": TCP})
    service = await create(w, services=[{"internal_port": 8080, "checks": [
        {"type": "http", "path": "/", "interval": "5s", "grace_period": "60s"}]}])
    await create(w)  # started, no checks
    await create(w, services=[{"internal_port": 8081}])  # a service without checks
    await create(w, skip_launch=True, checks={"db": TCP})  # checks, but not started
    stopped = await create(w, checks={"db": TCP})
    await w.machines.stop(stopped)
    await w.machines.settle()

    assert {row.id for row in queries.started_with_checks(w.store.db)} == {top, service}
    checks = HealthChecks(w.store, w.machines, w.metrics, lambda row: None)
    checks.reconcile()
    try:
        assert {machine_id for machine_id, _seq in checks.tasks} == {top, service}
        await w.machines.stop(top)
        await w.machines.settle()
        checks.reconcile()
        assert {machine_id for machine_id, _seq in checks.tasks} == {service}
    finally:
        await checks.close()


until = partial(poll_until, timeout=30.0, every=0.05)


async def test_a_commit_wakes_the_reconcile_loop_both_ways(big: W) -> None:
    w, _ = big
    checks = HealthChecks(w.store, w.machines, w.metrics, lambda row: None)
    loop = asyncio.create_task(checks.run())
    try:
        await asyncio.sleep(0.5)  # the loop has reconciled once and now waits for a commit
        mid = await create(w, checks={"db": TCP})
        await until(lambda: {m for m, _seq in checks.tasks} == {mid})
        await w.machines.stop(mid)
        await w.machines.settle()
        await until(lambda: not checks.tasks)
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
