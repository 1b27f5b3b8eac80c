"""A home's job rows in the view: a change of a job's state is shown at the next round, a
change of its counts alone at most twice a second (each row is gossiped to every host)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from bodega.registry import Registry
from bodega.wire.internal.jobs.calls import (
    HomeClaim,
    HomeRelease,
    HomeReleases,
    HomeSubmit,
    ReleaseItem,
)
from bodega.wire.public.jobs.api import SubmitBody
from bodega.worker.jobs import publish
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.publish import JobPublisher
from bodega.worker.jobs.store import JobStore


class Rows:
    """The view as the publisher writes it: what each put left, and how many puts."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.puts = 0
        self.commits = 0  # batches written together

    @contextmanager
    def writes_together(self) -> Iterator[None]:
        yield
        self.commits += 1

    def put_owned(self, table: str, key: str, doc: dict[str, Any]) -> None:
        self.docs[key] = doc
        self.puts += 1

    def get(self, table: str, key: str) -> dict[str, Any] | None:
        return self.docs.get(key)

    def rows(self, table: str, **_: object) -> list[dict[str, Any]]:
        return list(self.docs.values())

    def delete_owned(self, table: str, key: str) -> None:
        self.docs.pop(key, None)


def test_a_state_shows_at_once_and_counts_alone_twice_a_second(tmp_path: Path) -> None:
    clock = [100.0]
    store = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)
    home = JobHome(store, "w1", 1000)
    view = Rows()
    rows = JobPublisher(cast(Registry, view), home, clock=lambda: clock[0])
    home.changed = rows.mark
    spec = SubmitBody.model_validate({"command": "true", "count": 4}).spec("app", 1000.0)
    job = home.submit(HomeSubmit(spec=spec))
    assert rows.flush() is None
    assert view.docs[job.id]["state"] == "queued"

    home.claim(job.id, HomeClaim(worker="w2", mode="take", count=3, ref="p1.0"))
    clock[0] += 0.05
    assert rows.flush() is None  # queued -> running: shown at once
    assert view.docs[job.id]["state"] == "running"

    home.release_many(HomeReleases(worker="w2", items=[
        ReleaseItem(job=job.id, task=0, exit_code=0, attempt=1)]))
    clock[0] += 0.05
    puts = view.puts
    assert rows.flush() == pytest.approx(publish.BUSY_INTERVAL - 0.05)  # counts alone: later
    assert view.puts == puts
    assert view.docs[job.id]["counts"]["succeeded"] == 0
    clock[0] += publish.BUSY_INTERVAL
    assert rows.flush() is None
    assert view.docs[job.id]["counts"]["succeeded"] == 1

    home.release_many(HomeReleases(worker="w2", items=[
        ReleaseItem(job=job.id, task=i, exit_code=0, attempt=1) for i in (1, 2)]))
    home.claim(job.id, HomeClaim(worker="w2", mode="take", count=1, ref="p1.1"))
    home.release_many(HomeReleases(worker="w2", items=[
        ReleaseItem(job=job.id, task=3, exit_code=0, attempt=1)]))
    clock[0] += 0.05
    assert rows.flush() is None  # running -> succeeded: shown at once, counts and all
    assert (view.docs[job.id]["state"], view.docs[job.id]["counts"]["succeeded"]) == (
        "succeeded", 4)


def test_the_jobs_of_a_round_are_written_in_one_commit(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)
    home = JobHome(store, "w1", 1000)
    view = Rows()
    publisher = JobPublisher(cast(Registry, view), home, clock=lambda: 100.0)
    for name in ("a", "b", "c"):
        job = home.submit(HomeSubmit(spec=SubmitBody(name=name, command="true", pool="ext")
                                     .spec("app", 1000.0)))
        publisher.mark(job.id)
    publisher.flush()
    assert (view.puts, view.commits) == (3, 1)
    assert not publisher.dirty


def test_a_job_that_ended_before_its_first_round_is_not_written(tmp_path: Path) -> None:
    """Nothing of it was live; a job the view saw queued is written when it ends."""
    store = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)
    home = JobHome(store, "w1", 1000)
    view = Rows()
    publisher = JobPublisher(cast(Registry, view), home, clock=lambda: 100.0)
    home.changed = publisher.mark

    def submit(name: str) -> str:
        spec = SubmitBody(name=name, command="true", pool="ext").spec("app", 1000.0)
        return home.submit(HomeSubmit(spec=spec)).id

    def finish(job_id: str) -> None:
        home.claim(job_id, HomeClaim(worker="x1"))
        home.release(job_id, HomeRelease(worker="x1", task=0, exit_code=0))

    seen = submit("seen")
    publisher.flush()
    assert view.docs[seen]["state"] == "queued"
    quick = submit("quick")
    finish(quick)
    finish(seen)
    publisher.flush()
    assert set(view.docs) == {seen}
    assert view.docs[seen]["state"] == "succeeded"
    assert home.find("app", "quick").state == "succeeded"  # kept by its home
    publisher.publish_all()  # as at a start: still not written
    assert set(view.docs) == {seen}


def publishing(tmp_path: Path, now: list[float]) -> tuple[JobHome, Rows, JobPublisher]:
    """A home whose changes mark its jobs for a publisher writing to ``Rows``; the home's
    clock reads ``now[0]``."""
    home = JobHome(JobStore(tmp_path / "jobs.db", clock=lambda: now[0]), "w1", 1000)
    view = Rows()
    publisher = JobPublisher(cast(Registry, view), home, clock=lambda: 100.0)
    home.changed = publisher.mark
    return home, view, publisher


def test_a_job_running_at_its_first_look_is_written_once_it_has_run_a_while(
        tmp_path: Path) -> None:
    now = [1000.0]
    home, view, publisher = publishing(tmp_path, now)
    spec = SubmitBody(name="long", command="sleep 60", pool="ext").spec("app", now[0])
    job = home.submit(HomeSubmit(spec=spec))
    home.claim(job.id, HomeClaim(worker="x1"))  # running before the first round
    now[0] += 0.25
    assert publisher.flush() == pytest.approx(publish.STARTED_GRACE - 0.25)
    assert view.docs == {}
    now[0] += publish.STARTED_GRACE
    assert publisher.flush() is None
    assert view.docs[job.id]["state"] == "running"


def test_a_one_task_job_its_home_starts_is_written_once_it_has_waited_a_while(
        tmp_path: Path) -> None:
    """Queued at its home (every slot busy at its submit), a one-task job of bodega's pool
    is started there as a slot frees: no row unless it is still there after the grace."""
    now = [1000.0]
    home, view, publisher = publishing(tmp_path, now)

    def submit(name: str, **fields: Any) -> str:
        spec = SubmitBody(name=name, command="true", **fields).spec("app", now[0])
        return home.submit(HomeSubmit(spec=spec)).id

    quick, waiting = submit("quick"), submit("waiting")
    external, many = submit("external", pool="ext"), submit("many", count=2)
    now[0] += 0.05
    assert publisher.flush() == pytest.approx(publish.STARTED_GRACE - 0.05)
    assert set(view.docs) == {external, many}  # others' claims and takes find these
    home.claim(quick, HomeClaim(worker="w1", mode="take", count=1, ref="p.0"))
    home.release(quick, HomeRelease(worker="w1", task=0, exit_code=0))
    now[0] += publish.STARTED_GRACE
    assert publisher.flush() is None
    assert view.docs[waiting]["state"] == "queued"
    assert quick not in view.docs  # it ran and ended within the grace: only its home has it
