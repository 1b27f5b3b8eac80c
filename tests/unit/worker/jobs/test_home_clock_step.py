"""A home's clock stepped back: a lapsed lease stays lapsed, and a restart never stamps
earlier than the home already did.

The jobs database stamps leases with a clock that never runs backwards (``SteadyClock``),
from the newest time it recorded; these drive it with a fake host clock."""

from __future__ import annotations

import time
from pathlib import Path

from bodega.runtime.steady_clock import SteadyClock
from bodega.wire.internal.jobs.calls import HomeClaim, HomeSubmit
from bodega.wire.public.jobs.api import SubmitBody
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.store import JobStore
from tests.unit.runtime.test_steady_clock import Host


def submitted_and_taken(store: JobStore, lease: float) -> str:
    home = JobHome(store, "w1", 1000)
    spec = SubmitBody.model_validate({"command": "true", "count": 1, "max_attempts": 1,
                                      "lease_seconds": lease}).spec("app", store.clock())
    job = home.submit(HomeSubmit(spec=spec))
    taken = home.claim(job.id, HomeClaim(worker="w2", mode="take", count=1, ref="p1.0"))
    assert [t.task for t in taken.tasks] == [0]
    return job.id


def test_a_lapsed_lease_stays_lapsed_when_the_clock_steps_back(tmp_path: Path) -> None:
    host = Host()
    store = JobStore(tmp_path / "jobs.db", host.clock())
    job = submitted_and_taken(store, lease=10.0)
    assert store.lapsed(store.clock()) == []
    host.run(11)
    assert store.lapsed(store.clock()) == [(job, 0)]  # its task may go to another worker
    host.wall -= 90
    assert store.lapsed(store.clock()) == [(job, 0)]  # and the old lease does not hold again


def test_a_jobs_database_opened_again_never_stamps_earlier_than_it_did(
        tmp_path: Path) -> None:
    host = Host(wall=time.time() + 120)  # two minutes ahead of this host's clock now
    store = JobStore(tmp_path / "jobs.db", host.clock())
    submitted_and_taken(store, lease=10.0)
    stamped = store.newest_stamp()
    assert stamped >= host.wall
    store.close()
    # Restarted on the real clock: as if stepped back two minutes meanwhile.
    again = JobStore(tmp_path / "jobs.db")
    try:
        assert isinstance(again.clock, SteadyClock)
        assert again.clock() >= stamped
    finally:
        again.close()
