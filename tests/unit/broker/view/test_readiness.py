"""When a broker may answer from its view: after hearing from the cluster, or with no seeds."""

from __future__ import annotations

import asyncio

from bodega.broker.view.catalog import MemoryCatalog
from bodega.broker.view.readiness import Gate, judge


def test_no_seeds_is_ready_at_once() -> None:
    assert judge(seeded=False, synced=False, alive_workers=["w1"], worker_rows=()).ready


def test_seeded_but_never_synced_is_not_ready_and_says_why() -> None:
    state = judge(seeded=True, synced=False, alive_workers=(), worker_rows=())
    assert not state.ready
    assert "not yet synced" in state.why


def test_synced_waits_for_the_rows_of_alive_workers() -> None:
    state = judge(seeded=True, synced=True, alive_workers=["w2", "w1"], worker_rows=["w1"])
    assert not state.ready
    assert "1 alive worker(s): w2" in state.why
    many = judge(seeded=True, synced=True, alive_workers=[f"w{i}" for i in range(9)],
                 worker_rows=())
    assert "9 alive worker(s)" in many.why
    assert many.why.endswith("...")
    assert judge(seeded=True, synced=True, alive_workers=["w1"], worker_rows=["w1", "w9"]).ready
    assert judge(seeded=True, synced=True, alive_workers=(), worker_rows=()).ready


async def test_the_gate_opens_once_pulls_succeed_and_the_rows_are_there() -> None:
    catalog = MemoryCatalog()
    catalog.set_status("w1", "alive", role="worker")
    catalog.set_status("p1", "alive", role="proxy")  # not a worker: no row expected
    catalog.set_status("w2", "dead", role="worker")  # not alive: not waited for
    pulls: list[int] = []
    reloaded: list[bool] = []

    async def pull() -> int:
        pulls.append(1)
        if len(pulls) == 1:
            raise RuntimeError("a pull that blows up is retried")
        if len(pulls) == 3:
            catalog.put("workers", "w1", {"name": "w1", "region": "ams"})
        return 1 if len(pulls) >= 2 else 0

    gate = Gate(seeded=True)
    before = (gate.ready.is_set(), gate.state.ready)
    await asyncio.wait_for(gate.watch(catalog, pull, lambda: reloaded.append(True)), 10)
    assert before == (False, False)
    assert (gate.ready.is_set(), gate.state.ready) == (True, True)
    assert len(pulls) == 3
    assert reloaded == [True]
    assert Gate(seeded=False).ready.is_set()
