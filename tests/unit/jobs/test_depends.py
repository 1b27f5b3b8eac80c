"""When a job that runs after others may run, waits, or fails."""

from __future__ import annotations

from bodega.jobs.depends import GONE_AFTER, Gate, gate


def test_every_job_waited_for_succeeded_opens_the_gate() -> None:
    assert gate(("a", "b"), {"a": "succeeded", "b": "succeeded"}, 1.0) == Gate(open=True)


def test_jobs_not_yet_succeeded_are_still_waited_for() -> None:
    states = {"a": "succeeded", "b": "running", "c": "waiting", "d": None}
    assert gate(("a", "b", "c", "d"), states, 1.0) == Gate(waiting=("b", "c", "d"))


def test_one_failed_or_cancelled_fails_the_job_naming_it() -> None:
    assert gate(("a", "b"), {"a": "running", "b": "failed"}, 1.0) == \
        Gate(failed="job b it runs after was failed")
    assert gate(("a",), {"a": "cancelled"}, 1.0).failed == "job a it runs after was cancelled"


def test_a_job_no_home_knows_fails_it_only_after_a_grace() -> None:
    assert gate(("a",), {}, GONE_AFTER - 1) == Gate(waiting=("a",))
    assert gate(("a",), {}, GONE_AFTER).failed == "job a it runs after is not known any more"
