"""A one-task job starts at its submit in a warm slot of its home, on a real `bodega up`.

Once a job of many tasks has left warm slots on both workers, a one-task job of the same
shape is answered already running: its task claimed by its home and placed in one of the
home's slots in the submit's transaction, no probe placed anywhere and no take made (its
task has no take reference). A one-task job that finds no free slot of its shape on its
home (here: a task of another size) is committed queued and runs later by late binding,
as before. A task that printed nothing reads back as nothing, with no file kept for it, and
the next task of its slot writes its output in the file it left. A job of a shape whose
tasks ran short, submitted while every slot of it is busy, is written behind a slot's task,
and a cancel of it leaves that task to finish.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from bodega.worker.jobs.spare_outputs import SPARE_AFTER
from tests.cluster.jobs_kit import Jobs, jobs_up

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


def _task_row(db: Path, job_id: str) -> tuple[str | None, str | None]:
    """(claimant, take reference) of the job's task in its home's store."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT claimant, ref FROM tasks WHERE job_id = ? AND idx = 0",
                           (job_id,)).fetchone()
    return row[0], row[1]


def _lease_ends(db: Path, job_id: str) -> float:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        (ends,) = conn.execute("SELECT lease_expires_at FROM tasks WHERE job_id = ? AND "
                               "idx = 0", (job_id,)).fetchone()
    return float(ends)


def _probes_placed(db: Path, job_id: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        (n,) = conn.execute("SELECT count(*) FROM probes_out WHERE job_id = ?",
                            (job_id,)).fetchone()
    return int(n)


async def _warm(jobs: Jobs, app: str) -> dict[str, set[str]]:
    """Slots on both workers (more tasks at once than one worker has room for): worker ->
    the slots that ran the warm-up's tasks."""
    answer = await jobs.submit(app, {"name": "warmup", "command": "sleep 1", "count": 40})
    assert answer.status_code == 200, answer.text
    job = await jobs.finished(app, "warmup")
    assert job.state == "succeeded"
    slots: dict[str, set[str]] = {}
    for task in job.tasks or []:
        assert task.worker
        assert task.machine_id
        slots.setdefault(task.worker, set()).add(task.machine_id)
    assert sorted(slots) == sorted(jobs.workers), slots
    return slots


async def _quiet(jobs: Jobs, app: str, home: str, prefix: str) -> tuple[str, str]:
    """A one-task job that prints nothing, homed on ``home``: its id, and the slot it ran in
    there; ``bodega jobs logs`` prints nothing for it, and fails not."""
    name = jobs.name_on(home, app, prefix)
    answer = await jobs.submit(app, {"name": name, "command": "true"})
    assert answer.json()["state"] == "running", answer.text
    job = await jobs.finished(app, name)
    assert job.state == "succeeded"
    (task,) = job.tasks or []
    assert task.worker == home
    assert task.machine_id
    code, out, err = await jobs.cli("jobs", "logs", name, "-a", app)
    assert (code, out) == (0, ""), err
    return job.id, task.machine_id


async def test_a_one_task_job_starts_at_its_submit_in_a_warm_slot_of_its_home(
        tmp_path: Path) -> None:
    async with jobs_up(tmp_path) as (jobs, up):
        app = await jobs.app("jb-seat")
        slots = await _warm(jobs, app)
        for home in jobs.workers:
            name = jobs.name_on(home, app, "one")
            answer = await jobs.submit(app, {"name": name, "command": "sh -c 'echo seated'"})
            assert answer.status_code == 200, answer.text
            started = answer.json()
            assert (started["home"], started["state"]) == (home, "running"), started
            (task,) = started["tasks"]
            assert task["worker"] == home
            assert task["machine_id"] in slots[home], (task, slots)  # a slot warm there
            db = up.data_dir / "workers" / home / "jobs.db"
            assert _task_row(db, started["id"]) == (home, None)  # claimed by no take
            assert _probes_placed(db, started["id"]) == 0
            job = await jobs.finished(app, name)
            assert job.state == "succeeded"
            (ran,) = job.tasks or []
            assert (ran.attempts, ran.exit_codes, ran.worker) == (1, [0], home)
            assert ran.output == ["seated"]

        # Its home leased it and knows its machine from its start: it is renewed in its turn
        # (a third of its lease, 2 s at most), never announced as a take's run is (0.1 s).
        home = jobs.workers[0]
        name = jobs.name_on(home, app, "longer")
        answer = await jobs.submit(app, {"name": name, "command": "sleep 1.5"})
        assert answer.json()["state"] == "running", answer.text
        db = up.data_dir / "workers" / home / "jobs.db"
        leased = _lease_ends(db, answer.json()["id"])
        await asyncio.sleep(0.8)
        assert (await jobs.status(app, name)).state == "running"
        assert _lease_ends(db, answer.json()["id"]) == leased
        assert (await jobs.finished(app, name)).state == "succeeded"

        # A task that printed nothing reads back as nothing, with no file kept for it; the
        # next task of its slot, a second later, writes its output in the file it left.
        first, slot = await _quiet(jobs, app, home, "quiet")
        (out,) = [p for p in (up.data_dir / "workers" / home / "machines" / slot).rglob("out")
                  if p.is_dir()]
        logs = up.data_dir / "workers" / home / "jobs" / "logs"
        assert not list(logs.glob(f"{first}.*"))
        assert f"{first}.0 " in (logs / ".empty").read_text()
        before = {p.name: p.stat().st_ino for p in out.iterdir()}  # the slot's runs' files
        await asyncio.sleep(SPARE_AFTER + 0.2)
        # The slot idle the shortest is the one a one-task job starts in: that one.
        _, same_slot = await _quiet(jobs, app, home, "quieter")
        assert same_slot == slot
        after = {p.name: p.stat().st_ino for p in out.iterdir()}
        assert set(after.values()) == set(before.values())  # no file made: one used again
        assert set(after) != set(before)  # under the second's run

        # No free slot of its shape on its home: committed queued, run later by a take.
        home = jobs.workers[0]
        name = jobs.name_on(home, app, "bigger")
        answer = await jobs.submit(app, {"name": name, "command": "true", "memory_mb": 512})
        assert answer.status_code == 200, answer.text
        queued = answer.json()
        assert (queued["home"], queued["state"]) == (home, "queued"), queued
        job = await jobs.finished(app, name)
        assert job.state == "succeeded"
        (ran,) = job.tasks or []
        assert (ran.attempts, ran.exit_codes) == (1, [0])
        assert ran.machine_id not in set().union(*slots.values())
        worker = ran.worker
        assert worker in jobs.workers
        claimant, ref = _task_row(up.data_dir / "workers" / home / "jobs.db", job.id)
        assert (claimant, ref is not None) == (worker, True)  # given by a take


async def test_a_one_task_job_queued_at_its_submit_starts_in_the_first_slot_that_frees(
        tmp_path: Path) -> None:
    """Every warm slot busy at its submit: the job is committed queued, and the home starts
    it in the first of its slots to free, as at a submit (claimed by the home, no take)."""
    async with jobs_up(tmp_path, workers=1) as (jobs, up):
        app = await jobs.app("jb-seat-later")
        (home,) = jobs.workers
        await _warm(jobs, app)
        queued: dict[str, object] | None = None
        for i in range(40):  # sleepers until one finds every slot busy
            answer = await jobs.submit(app, {"name": f"sleeper-{i}", "command": "sleep 2"})
            assert answer.status_code == 200, answer.text
            if answer.json()["state"] == "queued":
                queued = answer.json()
                break
        assert queued is not None, "every sleeper started at its submit"
        job = await jobs.finished(app, str(queued["name"]))
        assert job.state == "succeeded"
        (ran,) = job.tasks or []
        assert (ran.attempts, ran.worker) == (1, home)
        db = up.data_dir / "workers" / home / "jobs.db"
        assert _task_row(db, job.id) == (home, None)  # started by its home, not by a take

        # A shape whose tasks have run short here: with its one slot busy, a job of it is
        # written behind that slot's task (answered running, in that slot), and a cancel
        # of it waits for that task to end: it never stops another job's task.
        shape = {"memory_mb": 512}  # a shape of its own: one slot, made by the first's take
        for i in range(6):
            answer = await jobs.submit(app, {"name": f"brief-{i}", "command": "true", **shape})
            assert answer.status_code == 200, answer.text
            assert (await jobs.finished(app, f"brief-{i}")).state == "succeeded"
        ahead = await jobs.submit(app, {"name": "ahead", "command": "sleep 3", **shape})
        assert ahead.json()["state"] == "running", ahead.text
        (slot,) = {t["machine_id"] for t in ahead.json()["tasks"]}
        behind = await jobs.submit(app, {"name": "behind", "command": "sleep 30", **shape})
        assert behind.json()["state"] == "running", behind.text
        assert [t["machine_id"] for t in behind.json()["tasks"]] == [slot]
        code, _, err = await jobs.cli("jobs", "cancel", "behind", "-a", app)
        assert code == 0, err
        done = await jobs.finished(app, "ahead")
        (ran,) = done.tasks or []
        assert (done.state, ran.attempts, ran.exit_codes, ran.machine_id) == (
            "succeeded", 1, [0], slot)
        assert (await jobs.finished(app, "behind")).state == "cancelled"
