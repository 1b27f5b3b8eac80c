"""What job users expect beyond a queue, on a real `bodega up` (two workers, process driver).

Dependencies: a job submitted ``after`` others waits (on a home other than theirs too, read
through the view) and runs once they succeed, its tasks starting after theirs ended, its
output read after its machine is gone; a job
after one that fails for good fails without running; an unknown job is a 400. Periodic
jobs: the workers' schedules read a clock the test writes (``--job-clock-file``), taken
across Paris's autumn night (02:30 happens twice: one run) and spring night (02:30 never
happens: one run, at 03:00), each with its runs named for their fire and found by name
through the broker; overlap skip and cancel with a run still going. The CLI submits both
kinds and shows them.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bodega.wire.public.jobs.api import JobStatus
from tests.cluster.deploy_kit import concurrently
from tests.cluster.jobs_kit import Jobs, jobs_up, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

PARIS = "Europe/Paris"


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


class Clock:
    """The clock every worker's schedules read: epoch seconds in a file, moved by the test."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def set(self, text: str) -> None:
        scratch = self.path.with_suffix(".new")
        scratch.write_text(f"{at(text)}\n")
        scratch.replace(self.path)  # never read half written

    async def seen(self, jobs: Jobs, app: str, name: str, text: str) -> JobStatus:
        """The job's status once its home's schedule has been read at ``text`` or later."""
        async def read() -> JobStatus | None:
            job = await jobs.status(app, name)
            checked = job.periodic.checked_at if job.periodic else None
            return job if checked and at(checked.rstrip("Z")) >= at(text) else None
        found: JobStatus = await until(read, timeout=30)
        return found


async def named(jobs: Jobs, app: str, name: str, *states: str) -> JobStatus:
    """Job ``name`` once the broker finds it (in one of ``states``, if given)."""
    async def read() -> JobStatus | None:
        answer = await jobs.http.get(f"/sched/status/{name}", params={"app": app})
        if answer.status_code == 404:
            return None
        assert answer.status_code == 200, answer.text
        job = JobStatus.model_validate(answer.json())
        return job if not states or job.state in states else None
    found: JobStatus = await until(read, timeout=60)
    return found


async def dependencies(jobs: Jobs) -> None:
    app = await jobs.app("jb-after")
    first, other = jobs.workers
    extract = jobs.name_on(first, app, "extract")
    transform = jobs.name_on(other, app, "transform")  # reads extract's state from the view
    assert (await jobs.submit(app, {"name": extract, "command": "sleep 2", "count": 2}
                              )).status_code == 200
    answer = await jobs.submit(app, {"name": transform, "command": "true", "count": 2,
                                     "after": [extract]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "waiting"
    assert answer.json()["waiting_for"] == [extract]
    code, out, err = await jobs.cli("jobs", "submit", "-a", app, "--name", "load",
                                    "--after", transform, "--", "echo", "loaded")
    assert code == 0, err
    assert f"after {transform}" in out
    done = await jobs.finished(app, "load", 120)
    assert done.state == "succeeded", done
    # Its output outlives its machine (destroyed when the task ended, or a warm slot's,
    # destroyed once idle). Gone is destroyed, or not found: in a full run of the suite
    # the broker's first answer for it was an error (most likely a 404), where alone the
    # test sees "destroyed"; not explained yet. The last answer is in the failure.
    (task,) = done.tasks or []
    seen: list[str] = []

    async def gone() -> bool:
        found = await jobs.http.get(f"/v1/apps/{app}/machines/{task.machine_id}")
        seen.append(f"{found.status_code} {found.json().get('state', found.text)}")
        if found.status_code == 404:
            return True
        assert found.status_code == 200, found.text
        return bool(found.json()["state"] == "destroyed")
    try:
        await until(gone, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: machine {task.machine_id} answered {seen[-1]}") from exc
    code, out, _ = await jobs.cli("jobs", "logs", "load", "-a", app)
    assert (code, out) == (0, "loaded\n")
    before, after = await jobs.status(app, extract), await jobs.status(app, transform)
    assert after.state == "succeeded"
    ended = max(t.ended_at or "" for t in before.tasks or [])
    assert all((t.started_at or "") >= ended for t in after.tasks or [])
    code, out, _ = await jobs.cli("jobs", "status", "load", "-a", app)
    assert code == 0
    assert f"after     {transform}" in out

    # One that fails for good fails those after it, which never run.
    assert (await jobs.submit(app, {"name": "broken", "command": "false",
                                    "max_attempts": 1})).status_code == 200
    await jobs.submit(app, {"name": "report", "command": "true", "count": 3,
                            "after": [extract, "broken"]})
    report = await jobs.finished(app, "report", 60)
    assert report.state == "failed"
    assert [(t.state, t.attempts, t.reason) for t in report.tasks or []] == \
        [("failed", 0, "job broken it runs after was failed")] * 3

    unknown = await jobs.submit(app, {"name": "orphan", "command": "true", "after": ["nope"]})
    assert unknown.status_code == 400
    assert unknown.json()["error"] == f"invalid_argument: after: no job named nope in app {app}"


async def autumn_and_spring(jobs: Jobs, clock: Clock) -> None:
    app = await jobs.app("jb-nightly")
    clock.set("2026-10-25T00:29:00")
    code, out, err = await jobs.cli("jobs", "submit", "-a", app, "--name", "nightly",
                                    "--cron", "30 2 * * *", "--time-zone", PARIS, "--", "true")
    assert code == 0, err
    assert "first run at 2026-10-25T00:30:00Z" in out  # 02:30 CEST

    clock.set("2026-10-25T00:30:05")
    run = await named(jobs, app, "nightly-20261025T0030Z", "succeeded")
    assert (run.parent, run.fire_at) == ("nightly", "2026-10-25T00:30:00Z")
    clock.set("2026-10-25T01:30:05")  # 02:30 again, now CET: not a second run
    job = await clock.seen(jobs, app, "nightly", "2026-10-25T01:30:05")
    assert job.periodic is not None
    assert (job.periodic.launched, job.periodic.next_run_at) == (1, "2026-10-26T01:30:00Z")
    clock.set("2026-10-26T01:30:05")
    await named(jobs, app, "nightly-20261026T0130Z", "succeeded")
    job = await clock.seen(jobs, app, "nightly", "2026-10-26T01:30:05")
    assert job.periodic is not None
    assert (job.periodic.launched, job.periodic.skipped) == (2, 0)
    code, out, _ = await jobs.cli("jobs", "status", "nightly", "-a", app)
    assert code == 0
    assert f"schedule  30 2 * * * in {PARIS}, overlap skip" in out
    assert "last run  nightly-20261026T0130Z succeeded" in out
    waits = await jobs.submit(app, {"name": "after-nightly", "command": "true",
                                    "after": ["nightly"]})
    assert waits.status_code == 400
    assert "job nightly is periodic: name one of its runs" in waits.json()["error"]
    assert (await jobs.api.cancel("nightly", app)).state == "cancelled"

    clock.set("2026-03-29T00:59:00")  # 01:59 CET; clocks jump to 03:00 at 01:00Z
    await jobs.submit(app, {"name": "spring", "command": "true",
                            "periodic": {"cron": "30 2 * * *", "time_zone": PARIS}})
    job = await jobs.status(app, "spring")
    assert job.periodic is not None
    assert job.periodic.next_run_at == "2026-03-29T01:00:00Z"  # 03:00 CEST: once, at the jump
    clock.set("2026-03-29T01:00:05")
    await named(jobs, app, "spring-20260329T0100Z", "succeeded")
    clock.set("2026-03-30T00:30:05")
    await named(jobs, app, "spring-20260330T0030Z", "succeeded")
    job = await clock.seen(jobs, app, "spring", "2026-03-30T00:30:05")
    assert job.periodic is not None
    assert (job.periodic.launched, job.periodic.skipped) == (2, 0)
    await jobs.api.cancel("spring", app)


async def overlap(jobs: Jobs, clock: Clock) -> None:
    app = await jobs.app("jb-overlap")
    clock.set("2027-01-01T00:00:30")
    for policy in ("skip", "cancel"):
        answer = await jobs.submit(app, {"name": policy, "command": "sleep 600",
                                         "periodic": {"cron": "* * * * *", "overlap": policy}})
        assert answer.status_code == 200, answer.text
    clock.set("2027-01-01T00:01:05")
    await asyncio.gather(named(jobs, app, "skip-20270101T0001Z", "running"),
                         named(jobs, app, "cancel-20270101T0001Z", "running"))
    clock.set("2027-01-01T00:02:05")
    replaced = await named(jobs, app, "cancel-20270101T0001Z", "cancelled")
    assert {t.state for t in replaced.tasks or []} == {"cancelled"}
    await named(jobs, app, "cancel-20270101T0002Z", "running")
    skip = await clock.seen(jobs, app, "skip", "2027-01-01T00:02:05")
    assert skip.periodic is not None
    assert (skip.periodic.launched, skip.periodic.skipped) == (1, 1)
    assert (await jobs.status(app, "skip-20270101T0001Z")).state == "running"
    for name in ("skip", "cancel", "skip-20270101T0001Z", "cancel-20270101T0002Z"):
        await jobs.api.cancel(name, app)


async def test_dependencies_and_periodic_jobs(tmp_path: Path) -> None:
    clock = Clock(tmp_path / "clock")
    async with jobs_up(tmp_path, worker_args=(f"--job-clock-file={clock.path}",)) as (jobs, _):
        async def schedules() -> None:
            await autumn_and_spring(jobs, clock)
            await overlap(jobs, clock)  # the clock is one for both: one after the other
        await concurrently(dependencies=dependencies(jobs), schedules=schedules())
