"""Invariant 1: no interleaving of operations ever over-commits the host.

Hypothesis generates batches of operations that run concurrently (they
interleave at every await), against a real store and the fake driver. After
each batch: what the ledger counts never exceeds the totals, and everything
actually running (or reserved) is counted.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from bodega.model.capacity import Ask, Totals
from bodega.model.errors import BodegaError
from bodega.model.machine import ExitStatus
from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.store import queries

from .conftest import make_worker, worker_config

TOTALS = Totals(cpus=2, memory_mb=1024, disk_gb=4, shared_cpu_ratio=2.0)
memory = st.sampled_from([256, 512, 768])
index = st.integers(0, 7)
# Creates, starts and crashes are listed twice: they are what fills a host and frees it.
action = st.one_of(
    st.tuples(st.just("create"), memory, st.booleans()),
    st.tuples(st.just("start"), index),
    st.tuples(st.just("crash"), index),
    st.tuples(st.just("reserve"), memory),
    st.tuples(st.just("release"), index),
    st.tuples(st.just("create"), memory, st.booleans()),
    st.tuples(st.just("create_reserved"), index, memory),
    st.tuples(st.just("start"), index),
    st.tuples(st.just("stop"), index),
    st.tuples(st.just("destroy"), index),
    st.tuples(st.just("update"), index, memory),
    st.tuples(st.just("crash"), index),
    st.tuples(st.just("volume"), st.integers(1, 3)),
)


def config(mem: int) -> MachineConfig:
    return MachineConfig.model_validate(
        {"image": "x", "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": mem},
         "restart": {"policy": "no"}}
    )


class World:
    def __init__(self, worker: Worker, driver: FakeDriver) -> None:
        self.w = worker
        self.driver = driver
        self.reservations: list[str] = []
        self.machines: list[str] = []

    def pick(self, items: list[str], i: int) -> str | None:
        return items[i % len(items)] if items else None

    async def run(self, step: tuple[object, ...]) -> None:
        kind = step[0]
        w = self.w
        if kind == "reserve":
            reservation = w.ledger.reserve(Ask(cpus=1, memory_mb=int(step[1])), "app", ttl=60)  # type: ignore[call-overload]
            self.reservations.append(reservation.id)
        elif kind == "release":
            rid = self.pick(self.reservations, int(step[1]))  # type: ignore[call-overload]
            if rid:
                w.ledger.release(rid)
        elif kind in ("create", "create_reserved"):
            rid = None
            if kind == "create_reserved":
                rid = self.pick(self.reservations, int(step[1]))  # type: ignore[call-overload]
                mem = int(step[2])  # type: ignore[call-overload]
            else:
                mem = int(step[1])  # type: ignore[call-overload]
            row, _ = await w.machines.creation.create(
                CreateMachineBody(app="app", config=config(mem), reservation_id=rid,
                              skip_launch=kind == "create" and bool(step[2]))
            )
            self.machines.append(row.id)
        elif kind == "volume":
            from bodega.worker.ops.volumes import VolumeRequest

            await w.volumes.create(VolumeRequest(app="app", name=f"v{len(self.machines)}",
                                                 region="ams", size_gb=int(step[1]),  # type: ignore[call-overload]
                                                 require_unique_zone=False))
        else:
            mid = self.pick(self.machines, int(step[1]))  # type: ignore[call-overload]
            if mid is None:
                return
            if kind == "start":
                await w.machines.start(mid)
            elif kind == "stop":
                await w.machines.stop(mid)
            elif kind == "destroy":
                await w.machines.destroy(mid, force=True)
            elif kind == "update":
                await w.machines.update(mid, config(int(step[2])))  # type: ignore[call-overload]
            elif kind == "crash":
                self.driver.exit(mid, ExitStatus(exit_code=1))

    def check(self) -> None:
        w = self.w
        used = w.ledger.usage()
        assert used.millicpus <= TOTALS.millicpus, used
        assert used.memory_mb <= TOTALS.memory_mb, used
        assert used.disk_gb <= TOTALS.disk_gb, used
        running_memory = 0
        for row in queries.list_machines(w.store.db, include_destroyed=True):
            if self.driver.running(row.id):
                assert row.holds_compute, f"{row.id} runs without holding its room ({row.state})"
                running_memory += row.memory_mb
        assert running_memory <= used.memory_mb


async def scenario(batches: list[list[tuple[object, ...]]]) -> int:
    peak = 0
    with tempfile.TemporaryDirectory() as tmp:
        worker, driver = make_worker(worker_config(Path(tmp), totals=TOTALS))
        await worker.network.setup()
        world = World(worker, driver)
        try:
            for batch in batches:
                results = await asyncio.gather(*(world.run(s) for s in batch),
                                               return_exceptions=True)
                for result in results:
                    if isinstance(result, BaseException) and not isinstance(result, BodegaError):
                        raise result
                world.check()
                await worker.machines.settle()
                world.check()
                peak = max(peak, worker.ledger.usage().memory_mb)
        finally:
            await worker.machines.settle()
            await worker.machines.supervision.close()
            worker.store.close()
    return peak


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(action, min_size=1, max_size=6), min_size=1, max_size=8))
def test_no_interleaving_over_commits(batches: list[list[tuple[object, ...]]]) -> None:
    peak = asyncio.run(scenario(batches))
    # Steer generation towards full hosts, where an over-commit would show.
    target(float(peak), label="peak memory committed")
