"""A home hears a worker's ends in one call: each heard or refused on its own, in one commit.

The home runs on its real jobs database; the worker's claims and ends are made as a bodega
worker makes them (a take, then the ends of its attempts).
"""

from __future__ import annotations

from pathlib import Path

from bodega.wire.internal.jobs.calls import HomeClaim, HomeReleases, HomeSubmit, ReleaseItem
from bodega.wire.public.jobs.api import SubmitBody
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.store import JobStore


def test_ends_reported_together_are_heard_or_refused_one_by_one(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)
    home = JobHome(store, "w1", 1000)
    spec = SubmitBody.model_validate({"command": "true", "count": 3, "max_attempts": 1}).spec(
        "app", 1000.0)
    job = home.submit(HomeSubmit(spec=spec))
    taken = home.claim(job.id, HomeClaim(worker="w2", mode="take", count=3, ref="p1.0"))
    assert sorted(t.task for t in taken.tasks) == [0, 1, 2]

    answer = home.release_many(HomeReleases(worker="w2", items=[
        ReleaseItem(job=job.id, task=0, exit_code=0, attempt=1),
        ReleaseItem(job=job.id, task=1, exit_code=0, attempt=2),  # not the attempt it holds
        ReleaseItem(job=job.id, task=2, exit_code=3, reason="exit code 3", attempt=1),
        ReleaseItem(job="no-such-job", task=0, exit_code=0, attempt=1),
    ]))

    assert [(r.task, r.status) for r in answer.results] == [
        (0, "ok"), (1, "refused"), (2, "ok"), (0, "gone")]
    states = {t.index: t for t in store.tasks(store.db, job.id)}
    assert states[0].state == "succeeded"
    assert states[1].state == "running"  # the refusal left it as it was
    assert states[2].state == "failed"
    assert states[2].exit_codes == (3,)
    # What was heard is kept: the store opened again reads the same.
    store.close()
    again = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)
    assert again.task(again.db, job.id, 0).state == "succeeded"  # type: ignore[union-attr]


def test_an_end_tells_the_home_the_machine_of_a_task_no_renewal_named(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)
    home = JobHome(store, "w1", 1000)
    spec = SubmitBody.model_validate({"command": "true", "count": 2}).spec("app", 1000.0)
    job = home.submit(HomeSubmit(spec=spec))
    home.claim(job.id, HomeClaim(worker="w2", mode="take", count=2, ref="p1.0"))
    home.release_many(HomeReleases(worker="w2", items=[
        ReleaseItem(job=job.id, task=0, exit_code=0, attempt=1, machine_id="slot-1"),
        ReleaseItem(job=job.id, task=1, exit_code=0, attempt=1)]))
    shown = {t.index: t.machine_id for t in home.status(home.get(job.id), tasks=True).tasks
             or []}
    assert shown == {0: "slot-1", 1: None}
