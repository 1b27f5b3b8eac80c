"""A worker's take of tasks gives back the room it reserved and did not use, even on a full disk.

The runner runs in an in-process worker (fake driver) on its real ledger and stores. The
probe's home is a worker missing from the view, so the take finds it unreachable and uses
none of its reservations.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from bodega.model.capacity import Ask
from bodega.model.errors import StorageFull
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.jobs.runs import RESERVATION_TTL
from bodega.worker.store.database import Store


def fill(store: Store) -> None:
    """Leave no room in the store: SQLite's page limit stands in for a full disk, and the
    pages there are filled until not even a step with an empty payload fits."""
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")
    size = 100_000
    while True:
        try:
            with store.tx() as conn:
                store.append(conn, op_id="fill", resource_id="fill", fsm="fill", step="fill",
                             payload={"blob": "x" * size} if size else {})
        except StorageFull:
            if size == 0:
                return
            size //= 2


async def test_a_take_on_a_full_disk_tries_every_release_and_wakes_the_runner_again(
        worker: tuple[Worker, FakeDriver], caplog: pytest.LogCaptureFixture) -> None:
    w, _ = worker
    runner = w.jobs.runner
    runner.store.add_probe("j1", "w2", "app", Ask(cpus=1, memory_mb=256), 2, 0.0)
    runner.serve_queue()  # room reserved for both tasks; the take is spawned
    assert w.ledger.snapshot().reservations == 2
    fill(w.store)
    runner.wake.clear()

    with caplog.at_level(logging.WARNING, logger="bodega.worker.jobs"):
        await asyncio.gather(*runner._tasks)  # the take ends without raising

    assert runner.wake.is_set()
    assert "j1" not in runner._taking  # its probe is served again
    (warning,) = [r.getMessage() for r in caplog.records if "not released" in r.getMessage()]
    assert "2 unused reservation(s)" in warning  # the second was tried after the first
    # Kept by the full disk, they hold room only until their TTL passes.
    assert w.ledger.snapshot().reservations == 2
    w.store.clock = lambda: time.time() + RESERVATION_TTL + 1
    assert w.ledger.snapshot().reservations == 0
    assert w.ledger.usage().memory_mb == 0
