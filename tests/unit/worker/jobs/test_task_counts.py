"""A job's counts by state, kept by the jobs database's own triggers: always what the tasks
say, through claims, ends, a job's removal, and a database made before the counts were;
what may be claimed now, from them; a big job's few tasks read by index."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from bodega.jobs.spec import BODEGA_POOL
from bodega.wire.internal.jobs.calls import HomeClaim, HomeReleases, HomeSubmit, ReleaseItem
from bodega.wire.public.jobs.api import SubmitBody
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.schema import MIGRATIONS
from bodega.worker.jobs.store import JobStore


def counted(conn: sqlite3.Connection, job_id: str) -> dict[str, int]:
    """The counts read from the tasks themselves, row by row: the oracle."""
    return {str(state): int(n) for state, n in conn.execute(
        "SELECT state, count(*) FROM tasks WHERE job_id = ? GROUP BY state", (job_id,))}


def kept(store: JobStore, job_id: str) -> dict[str, int]:
    return {state: n for state, n in store.counts(store.db, job_id).items() if n}


def a_job(tmp_path: Path) -> tuple[JobStore, JobHome, str]:
    store = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)
    home = JobHome(store, "w1", 1000)
    spec = SubmitBody.model_validate({"command": "true", "count": 5, "max_attempts": 1}).spec(
        "app", 1000.0)
    return store, home, home.submit(HomeSubmit(spec=spec)).id


def test_counts_follow_claims_and_ends_and_go_with_their_job(tmp_path: Path) -> None:
    store, home, job = a_job(tmp_path)
    assert kept(store, job) == counted(store.db, job) == {"queued": 5}
    home.claim(job, HomeClaim(worker="w2", mode="take", count=3, ref="p1.0"))
    assert kept(store, job) == counted(store.db, job) == {"queued": 2, "running": 3}
    home.release_many(HomeReleases(worker="w2", items=[
        ReleaseItem(job=job, task=0, exit_code=0, attempt=1),
        ReleaseItem(job=job, task=1, exit_code=0, attempt=1),
        ReleaseItem(job=job, task=2, exit_code=4, reason="exit code 4", attempt=1)]))
    assert kept(store, job) == counted(store.db, job) == {
        "queued": 2, "succeeded": 2, "failed": 1}
    with store.tx() as conn:
        store.delete_job(conn, job)
    assert tuple(store.db.execute("SELECT count(*) FROM task_counts").fetchone()) == (0,)


def test_a_count_that_falls_to_zero_goes_so_finished_jobs_leave_no_queued_count(
        tmp_path: Path) -> None:
    store, home, job = a_job(tmp_path)
    home.claim(job, HomeClaim(worker="w2", mode="take", count=5, ref="p1.0"))
    home.release_many(HomeReleases(worker="w2", items=[
        ReleaseItem(job=job, task=i, exit_code=0, attempt=1) for i in range(5)]))
    rows = list(store.db.execute("SELECT state, n FROM task_counts WHERE job_id = ?", (job,)))
    assert [tuple(r) for r in rows] == [("succeeded", 5)]
    assert store.queued_total() == 0
    assert store.counts(store.db, job)["queued"] == 0  # read as zero all the same
    plan = " ".join(str(tuple(r)) for r in store.db.execute(
        "EXPLAIN QUERY PLAN SELECT 1 FROM jobs WHERE finished_at IS NULL AND state = 's'"))
    assert "jobs_unfinished" in plan  # unfinished jobs found without the finished ones


def test_a_database_from_before_the_counts_gets_them_from_its_tasks(tmp_path: Path) -> None:
    store, home, job = a_job(tmp_path)
    home.claim(job, HomeClaim(worker="w2", mode="take", count=2, ref="p1.0"))
    # As a version before the counts left it: no table, no triggers, and neither the
    # counts' nor the unfinished jobs' index that came after: two migrations fewer.
    store.db.executescript(
        "DROP INDEX jobs_unfinished; DROP INDEX task_counts_by_state; "
        "DROP TRIGGER task_counts_insert; DROP TRIGGER task_counts_update; "
        "DROP TRIGGER task_counts_delete; DROP TABLE task_counts; DROP INDEX tasks_running; "
        "DROP INDEX tasks_backoff; DROP INDEX tasks_queued; CREATE INDEX tasks_queued ON "
        "tasks (job_id, eligible_at) WHERE state = 'queued'; CREATE INDEX tasks_states ON "
        "tasks (job_id, state); CREATE INDEX tasks_held ON tasks (claimant) "
        "WHERE state = 'running'; "
        f"PRAGMA user_version = {len(MIGRATIONS) - 2};")
    store.close()
    again = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)
    assert kept(again, job) == counted(again.db, job) == {"queued": 3, "running": 2}
    assert again.claimable_by_job(1000.0, BODEGA_POOL) == {job: 3}


def test_what_may_be_claimed_now_leaves_out_backoffs_waiting_jobs_and_other_pools(
        tmp_path: Path) -> None:
    store, _, job = a_job(tmp_path)
    assert store.claimable_by_job(1000.0, BODEGA_POOL) == {job: 5}
    with store.tx() as conn:  # two of its tasks wait out a backoff until 1060
        for index in (1, 3):
            task = store.task(conn, job, index)
            assert task is not None
            store.put_task(conn, job, replace(task, eligible_at=1060.0))
    assert store.claimable_by_job(1000.0, BODEGA_POOL) == {job: 3}
    assert store.claimable_by_job(1060.0, BODEGA_POOL) == {job: 5}
    assert store.claimable_by_job(1000.0, "external") == {}
    with store.tx() as conn:
        store.set_waiting(conn, job, ("another",))
    assert store.claimable_by_job(1000.0, BODEGA_POOL) == {}
    assert store.queued_total() == 5


def test_a_big_job_s_few_running_or_first_queued_tasks_are_read_by_index(
        tmp_path: Path) -> None:
    # A claim, a renewal and a worker's ends each read a few of the job's tasks: by an index
    # of those in that state, never by walking the job's every row (nor sorting them).
    store, _, job = a_job(tmp_path)
    reads = {
        "claimable": ("SELECT * FROM tasks WHERE job_id = ? AND state = 'queued' AND "
                      "eligible_at <= ? ORDER BY idx LIMIT ?", (job, 1000.0, 8)),
        "held": ("SELECT * FROM tasks WHERE job_id = ? AND state = 'running' AND "
                 "claimant = ? AND ref = ? ORDER BY idx", (job, "w2", "p1.0")),
        "running": ("SELECT * FROM tasks WHERE job_id = ? AND state = 'running' ORDER BY idx",
                    (job,)),
    }
    for name, (sql, args) in reads.items():
        plan = " ".join(r[3] for r in store.db.execute("EXPLAIN QUERY PLAN " + sql, args))
        assert plan.startswith("SEARCH tasks USING INDEX tasks_"), (name, plan)
        assert "autoindex" not in plan, (name, plan)
        assert "TEMP B-TREE" not in plan, (name, plan)
