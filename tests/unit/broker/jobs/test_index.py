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


def queued(name: str, tasks: int, updated: str) -> JobStatus:
    return job(name, "ams-1", updated=updated).model_copy(
        update={"count": tasks, "counts": {"queued": tasks}})


def listed(index: JobIndex) -> list[str]:
    return [j.name for j in index.listing(pool="bodega", queued_only=True)]


def test_a_claim_won_here_unlists_a_job_until_its_row_says_for_itself() -> None:
    index = JobIndex()
    index.note(queued("one", 1, "1"))
    index.note(queued("two", 2, "1"))
    index.claimed("id-one")
    index.claimed("id-two")
    assert listed(index) == ["two"]  # one of its two tasks is still queued
    index.claimed("id-two")
    assert listed(index) == []
    index.note(queued("one", 1, "1"))  # the same row again changes nothing
    assert listed(index) == []
    index.note(queued("one", 1, "2"))  # a newer row (the claim given back): listed again
    assert listed(index) == ["one"]


def test_a_claim_refused_with_none_left_unlists_the_whole_job() -> None:
    index = JobIndex()
    index.note(queued("three", 3, "1"))
    index.claimed("id-three", none_left=True)
    assert listed(index) == []
    assert index.queued(index.jobs["id-three"]) == 0
    index.note(queued("three", 3, "0"))  # an older row: ignored, still unlisted
    assert listed(index) == []


def test_claims_heard_against_an_older_row_do_not_count_against_a_newer_one() -> None:
    index = JobIndex()
    index.note(queued("four", 4, "1"))
    index.claimed("id-four")
    index.claimed("id-four")
    index.note(queued("four", 2, "2"))  # the home's row: those two claimed
    assert index.queued(index.jobs["id-four"]) == 2
    index.claimed("id-four")
    assert index.queued(index.jobs["id-four"]) == 1
    index.claimed("id-unknown")  # a job the view never had: nothing to do
    index.forget("id-four")
    assert listed(index) == []


def test_a_claim_on_its_way_to_the_home_unlists_its_task_while_it_is() -> None:
    index = JobIndex()
    index.note(queued("five", 1, "1"))
    index.claiming("id-five")
    assert listed(index) == []
    index.claiming("id-five", sent=False)  # refused for another reason (the home was down)
    assert listed(index) == ["five"]
    index.claiming("id-five", sent=False)  # an answer more than was sent counts nothing
    index.claiming("id-five")
    assert listed(index) == []
