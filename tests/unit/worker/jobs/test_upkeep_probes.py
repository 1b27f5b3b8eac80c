"""A home's upkeep tops up its queued jobs' probes in one commit that no fsync holds up.

The home runs on its real jobs database; the workers it sees are given to its peers as a
view would give them (alive or not, and their room).
"""

from __future__ import annotations

import os
import random
import sqlite3
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from bodega.jobs.binding import WorkerRoom
from bodega.wire.internal.jobs.calls import HomeSubmit
from bodega.wire.public.jobs.api import SubmitBody
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.peers import JobPeers
from bodega.worker.jobs.store import JobStore
from bodega.worker.jobs.upkeep import JobUpkeep, UpkeepConfig
from bodega.worker.jobs.waits import JobWaits

NOW = 1000.0


def room(name: str, alive: bool = True) -> WorkerRoom:
    return WorkerRoom(name=name, alive=alive, cordoned=False, free_millicpus=4000,
                      free_memory_mb=4096)


def test_a_ticks_probes_are_placed_and_the_lost_ones_forgotten_in_one_unsynced_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = JobStore(tmp_path / "jobs.db", clock=lambda: NOW)
    home = JobHome(store, "w1", 1000)
    rooms = [room("w1"), room("w2"), room("gone", alive=False)]
    peers = JobPeers("w1", None, lambda _w: None, lambda w: w != "gone", lambda: rooms)
    upkeep = JobUpkeep(home, peers, UpkeepConfig(), JobWaits(home, lambda _a, _n: None),
                       random.Random(1))
    jobs = [home.submit(HomeSubmit(spec=SubmitBody.model_validate(
        {"name": f"j{n}", "command": "true"}).spec("app", NOW))) for n in range(3)]
    with store.tx(synced=False) as conn:  # a probe on a worker since lost
        store.add_probes(conn, jobs[0].id, {"gone": 1}, NOW)
    fsyncs: list[int] = []
    monkeypatch.setattr(os, "fsync", fsyncs.append)
    commits: list[bool] = []
    tx = store.tx

    def counted(*, synced: bool = True) -> AbstractContextManager[sqlite3.Connection]:
        commits.append(synced)
        return tx(synced=synced)

    monkeypatch.setattr(store, "tx", counted)

    upkeep.top_up_probes(NOW)

    assert (commits, fsyncs) == ([False], [])
    for job in jobs:
        placed = {worker: count for _, worker, count, _ in store.probes_out(job.id)}
        assert "gone" not in placed
        assert sum(placed.values()) == 2  # the ratio's two, on the live workers
        assert set(placed) <= {"w1", "w2"}
    store.close()
