"""A home offers its queued one-task jobs the slots that come free, oldest job first; a shape
with no slot free is asked for once a look, not once a job.

Most ends free no slot (the next task was written ahead), so a look that asked the slots
for each queued job cost a home most of its work a job. The home runs on a real jobs
database; its slots are a fake that counts the asks.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from bodega.wire.internal.jobs.calls import HomeSubmit
from bodega.wire.public.jobs.api import SubmitBody
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.run_store import RunStore
from bodega.worker.jobs.seats import SubmitSeats
from bodega.worker.jobs.store import JobStore

NOW = 1000.0


class Slots:
    """``free`` slots to give, each once; every ask counted by shape."""

    def __init__(self, free: int) -> None:
        self.left = free
        self.asked: list[str] = []

    def free(self, key: str) -> Any:
        self.asked.append(key)
        if self.left <= 0:
            return None
        self.left -= 1
        return SimpleNamespace(machine_id=f"slot-{self.left}")


def home_with(tmp_path: Path, slots: Slots) -> tuple[JobHome, list[str]]:
    store = JobStore(tmp_path / "jobs.db", clock=lambda: NOW)
    home = JobHome(store, "w1", 1000)
    names = [home.submit(HomeSubmit(spec=SubmitBody.model_validate(
        {"name": f"j{n}", "command": ["/bin/true", str(n)]}).spec("app", NOW))).id
        for n in range(5)]  # queued: no seats yet
    seats = SubmitSeats(RunStore(store), cast(Any, slots), "w1")
    seats.start = lambda seated: None  # type: ignore[method-assign]
    home.seats = seats
    return home, names


def test_a_shape_with_no_slot_free_is_asked_for_once_a_look(tmp_path: Path) -> None:
    slots = Slots(free=0)
    home, _ = home_with(tmp_path, slots)
    assert home.seat_queued() == 0
    assert len(slots.asked) == 1  # five jobs of one shape: one ask


def test_free_slots_go_to_the_oldest_jobs_then_the_asks_stop(tmp_path: Path) -> None:
    slots = Slots(free=2)
    home, jobs = home_with(tmp_path, slots)
    assert home.seat_queued() == 2
    assert len(slots.asked) == 3  # two given, the third found none: the rest not asked
    states = {job: home.store.job(job).state for job in jobs}  # type: ignore[union-attr]
    # The oldest first, by id (a ULID: its time, then its randomness within a millisecond).
    assert [str(states[job]) for job in sorted(jobs)] == \
        ["running", "running", "queued", "queued", "queued"]
