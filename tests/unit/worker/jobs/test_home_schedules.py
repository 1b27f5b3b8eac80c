"""A home's periodic jobs and jobs that run after others, on its real jobs database.

The calendar the schedules read is a number the test moves; everything else is the home
as a worker runs it (its store, its transactions), with claims and releases made as an
external worker would make them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bodega.model.errors import Conflict
from bodega.wire.internal.jobs.calls import HomeClaim, HomeRelease, HomeSubmit
from bodega.wire.public.jobs.api import SubmitBody
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.schedules import JobSchedules
from bodega.worker.jobs.store import JobRow, JobStore
from bodega.worker.jobs.waits import JobWaits


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0,
        second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


class Home:
    """A home on a jobs database, a calendar set by hand and a view of other homes' jobs."""

    def __init__(self, path: Path, at: float) -> None:
        self.path = path
        self.at = at
        self.viewed: dict[str, str] = {}
        self.open()

    def open(self) -> None:
        self.store = JobStore(self.path, clock=lambda: self.at)
        self.home = JobHome(self.store, "w1", 1000, calendar=lambda: self.at)
        self.schedules = JobSchedules(self.home)
        self.waits = JobWaits(self.home, lambda _app, name: self.viewed.get(name))

    def restart(self) -> None:
        self.store.close()
        self.open()

    def submit(self, **body: object) -> JobRow:
        spec = SubmitBody.model_validate({"command": "true", "pool": "ext", **body}).spec(
            "app", self.at)
        return self.home.submit(HomeSubmit(spec=spec))

    def tick(self, at: float) -> None:
        self.at = at
        self.schedules.tick()
        self.waits.tick(at, force=True)

    def runs(self, parent: str) -> list[str]:
        return sorted(j.name for j in self.store.jobs("app") if j.spec.parent == parent)

    def finish(self, name: str, exit_code: int = 0) -> None:
        job = self.home.find("app", name)
        self.home.claim(job.id, HomeClaim(worker="x1"))
        self.home.release(job.id, HomeRelease(worker="x1", task=0, exit_code=exit_code))

    def state(self, name: str) -> str:
        return str(self.home.find("app", name).state)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    made = Home(tmp_path / "jobs.db", utc(2026, 10, 24, 23, 0))
    yield made
    made.store.close()


NIGHTLY = {"cron": "30 2 * * *", "time_zone": "Europe/Paris"}


def test_a_periodic_job_runs_once_across_the_autumn_night_and_once_after(home: Home) -> None:
    home.submit(name="nightly", periodic=NIGHTLY)
    assert home.state("nightly") == "scheduled"
    for minute in range(0, 4 * 60, 7):  # 23:00Z to 03:00Z: both 02:30 of Paris pass
        home.tick(utc(2026, 10, 24, 23, 0) + minute * 60)
        for run in home.runs("nightly"):
            if home.state(run) == "queued":
                home.finish(run)
    assert home.runs("nightly") == ["nightly-20261025T0030Z"]
    home.tick(utc(2026, 10, 26, 1, 30, 5))
    assert home.runs("nightly") == ["nightly-20261025T0030Z", "nightly-20261026T0130Z"]
    status = home.home.status(home.home.find("app", "nightly"))
    assert status.periodic is not None
    assert (status.periodic.launched, status.periodic.skipped) == (2, 0)
    assert status.periodic.next_run_at == "2026-10-27T01:30:00Z"


def test_a_run_inherits_the_job_and_has_a_deadline_per_run(home: Home) -> None:
    home.submit(name="report", count=3, deadline=600, periodic={"cron": "0 * * * *"})
    home.tick(utc(2026, 10, 25, 0, 0, 1))
    run = home.home.find("app", "report-20261025T0000Z")
    assert run.spec.count == 3
    assert run.spec.deadline_at == home.at + 600
    assert run.spec.periodic is None
    status = home.home.status(run)
    assert (status.parent, status.fire_at) == ("report", "2026-10-25T00:00:00Z")
    with pytest.raises(Conflict, match="is periodic"):
        home.home.claim(home.home.find("app", "report").id, HomeClaim(worker="x1"))


@pytest.mark.parametrize(("overlap", "runs", "skipped", "cancelled"), [
    ("skip", ["h-20261025T0000Z"], 2, False),
    ("queue", ["h-20261025T0000Z"], 0, False),
    ("cancel", ["h-20261025T0000Z", "h-20261025T0100Z", "h-20261025T0200Z"], 0, True),
])
def test_a_fire_while_the_last_run_goes_follows_the_overlap_policy(
        home: Home, overlap: str, runs: list[str], skipped: int, cancelled: bool) -> None:
    home.submit(name="h", periodic={"cron": "0 * * * *", "overlap": overlap})
    for hour in range(3):  # three fires; nobody runs the first run
        home.tick(utc(2026, 10, 25, hour, 0, 1))
    assert home.runs("h") == runs
    status = home.home.status(home.home.find("app", "h"))
    assert status.periodic is not None
    assert status.periodic.skipped == skipped
    assert (home.state("h-20261025T0000Z") == "cancelled") == cancelled
    if overlap == "queue":  # the 01:00 and 02:00 fires wait for the 00:00 run, in order
        assert status.periodic.pending == 2
        home.finish("h-20261025T0000Z")
        home.tick(utc(2026, 10, 25, 2, 0, 2))
        assert home.runs("h") == [*runs, "h-20261025T0100Z"]
        home.tick(utc(2026, 10, 25, 2, 0, 3))  # the 01:00 run still goes
        assert home.runs("h") == [*runs, "h-20261025T0100Z"]
        home.finish("h-20261025T0100Z")
        home.tick(utc(2026, 10, 25, 2, 0, 4))
        assert home.runs("h") == [*runs, "h-20261025T0100Z", "h-20261025T0200Z"]


def test_a_home_restarted_goes_on_and_runs_the_latest_missed_fire_once(home: Home) -> None:
    home.at = utc(2026, 10, 24, 23, 59)
    home.submit(name="q", periodic={"cron": "*/15 * * * *"})
    home.tick(utc(2026, 10, 25, 0, 0, 1))
    home.finish("q-20261025T0000Z")
    home.restart()
    home.tick(utc(2026, 10, 25, 1, 5))  # 00:15, 00:30, 00:45 and 01:00 passed while down
    home.tick(utc(2026, 10, 25, 1, 6))
    assert home.runs("q") == ["q-20261025T0000Z", "q-20261025T0100Z"]
    status = home.home.status(home.home.find("app", "q"))
    assert status.periodic is not None
    assert (status.periodic.launched, status.periodic.skipped) == (2, 3)


def test_a_cancelled_periodic_job_fires_no_more(home: Home) -> None:
    job = home.submit(name="c", periodic={"cron": "0 * * * *"})
    home.home.cancel(job.id)
    home.tick(utc(2026, 10, 25, 3, 0, 1))
    assert home.runs("c") == []
    assert home.state("c") == "cancelled"


def test_a_job_waits_for_those_it_runs_after_and_then_runs(home: Home) -> None:
    home.submit(name="extract")
    job = home.submit(name="load", after=["extract", "elsewhere"])
    assert home.state("load") == "waiting"
    with pytest.raises(Conflict, match="waits for extract, elsewhere"):
        home.home.claim(job.id, HomeClaim(worker="x1"))
    home.finish("extract")
    home.tick(home.at + 1)
    assert home.home.find("app", "load").waiting == ("elsewhere",)
    home.viewed["elsewhere"] = "succeeded"  # another home's job, as the view has it
    home.tick(home.at + 1)
    assert home.state("load") == "queued"
    home.finish("load")
    assert home.state("load") == "succeeded"


async def test_a_job_only_its_home_keeps_is_asked_of_it(home: Home) -> None:
    """A job that ended before its home's first publish is in no view: its state is asked of
    its home, once a second at most, and kept while a job waits for it."""
    asked: list[str] = []
    states = {"elsewhere": "running"}

    async def ask(_app: str, name: str) -> str | None:
        asked.append(name)
        return states.get(name)

    home.waits.ask = ask
    home.submit(name="load", after=["elsewhere"])
    start = home.at
    await home.waits.look_up(start)
    home.tick(start + 0.1)
    assert home.state("load") == "waiting"  # asked, not finished: not kept
    await home.waits.look_up(start + 0.5)  # within the second: not asked again
    assert asked == ["elsewhere"]
    states["elsewhere"] = "succeeded"
    await home.waits.look_up(start + 1)
    home.tick(start + 1.1)
    assert home.state("load") == "queued"
    assert asked == ["elsewhere", "elsewhere"]
    await home.waits.look_up(start + 2)  # no job waits for it any more: forgotten
    assert home.waits.asked == {}


def test_a_job_fails_without_running_when_one_it_runs_after_fails(home: Home) -> None:
    home.submit(name="extract", max_attempts=1)
    home.submit(name="load", count=2, after=["extract"])
    home.finish("extract", exit_code=3)
    home.tick(home.at + 1)
    status = home.home.status(home.home.find("app", "load"))
    assert status.state == "failed"
    assert status.waiting_for == []
    assert [(t.state, t.attempts, t.reason) for t in status.tasks or []] == \
        [("failed", 0, "job extract it runs after was failed")] * 2


def test_a_waiting_job_cancelled_is_cancelled_not_left_waiting(home: Home) -> None:
    home.submit(name="first")
    job = home.submit(name="second", after=["first"])
    home.home.cancel(job.id)
    assert home.state("second") == "cancelled"
    assert home.store.waiting_jobs() == []
