"""Where the broker sends a submit: the home of the job its key or its name already made."""

from __future__ import annotations

from bodega.broker.jobs.core.index import JobIndex
from bodega.jobs.homes import job_key, rendezvous
from bodega.wire.public.jobs.api import JobStatus

WORKERS = ["ams-1", "ams-2", "ams-3"]


def job(name: str, home: str, key: str | None = None, updated: str = "1") -> JobStatus:
    return JobStatus(id=f"id-{name}", name=name, app="a", pool="bodega", state="queued",
                     home=home, count=1, idempotency_key=key, updated_at=updated)


def elsewhere(name: str) -> str:
    """A home that the rendezvous order of ``name`` would not pick first."""
    return rendezvous(job_key("a", name), WORKERS)[-1]


def test_a_retry_that_changed_its_name_goes_to_the_home_that_holds_its_key() -> None:
    index = JobIndex()
    home = elsewhere("renamed")
    index.note(job("once", home, key="build-42"))
    assert index.submit_homes("a", "renamed", "build-42", WORKERS) == [home]


def test_a_known_name_goes_to_its_home_which_decides_name_taken() -> None:
    index = JobIndex()
    home = elsewhere("once")
    index.note(job("once", home, key="build-42"))
    assert index.submit_homes("a", "once", "build-43", WORKERS) == [home]
    assert index.submit_homes("a", "once", None, WORKERS) == [home]


def test_a_new_job_goes_by_the_rendezvous_order_of_its_name() -> None:
    index = JobIndex()
    index.note(job("other", "ams-1", key="k"))
    assert index.submit_homes("a", "new", "k2", WORKERS) == rendezvous(job_key("a", "new"),
                                                                      WORKERS)


def test_a_forgotten_or_renamed_job_leaves_no_stale_key() -> None:
    index = JobIndex()
    index.note(job("once", "ams-2", key="k"))
    index.note(job("once", "ams-2", key=None, updated="2").model_copy(update={"id": "id-once"}))
    assert index.keyed("a", "k") is None
    index.note(job("twice", "ams-3", key="k2"))
    index.forget("id-twice")
    assert index.keyed("a", "k2") is None
    assert index.named("a", "twice") is None
