"""A drain's cordon is kept in the worker's own store with its reason: a restarted worker
is still cordoned for the drain, its row says ``draining``, and placement refuses it
saying so; an uncordon clears both."""

from __future__ import annotations

from pathlib import Path

from bodega.model.capacity import Ask
from bodega.model.rows import WorkerRow
from bodega.model.rows.workers import DRAINING
from bodega.placement import PlacementRequest
from bodega.placement.filters import refusal
from bodega.placement.request import Candidate
from tests.unit.worker.conftest import in_process_worker, worker_config


def candidate(row: WorkerRow) -> Candidate:
    return Candidate.from_view(row, "alive")


async def test_a_drain_cordon_survives_a_restart_and_placement_says_draining(
        tmp_path: Path) -> None:
    config = worker_config(tmp_path)
    async with in_process_worker(config) as (w, _):
        w.ledger.set_cordoned(True, DRAINING)
        assert (w.ledger.cordoned, w.ledger.cordon_reason) == (True, DRAINING)
    async with in_process_worker(config) as (w, _):  # the same store, a new worker
        snapshot = w.ledger.snapshot()
        assert (snapshot.cordoned, snapshot.cordon_reason) == (True, DRAINING)
        row = WorkerRow(name="w1", region="ams", url="http://w1", totals=snapshot.totals,
                        used=snapshot.used, cordoned=snapshot.cordoned,
                        cordon_reason=snapshot.cordon_reason)
        request = PlacementRequest(app="web", ask=Ask(cpus=1, memory_mb=256), regions=("ams",))
        assert refusal(request, candidate(row)) == "draining"
        w.ledger.set_cordoned(False)
        assert (w.ledger.cordoned, w.ledger.cordon_reason) == (False, None)
        w.ledger.set_cordoned(True)  # a plain cordon names no reason
        assert w.ledger.cordon_reason is None
        plain = row.model_copy(update={"cordon_reason": None})
        assert refusal(request, candidate(plain)) == "cordoned"
