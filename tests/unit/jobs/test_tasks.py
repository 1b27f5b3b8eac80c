"""A task's rules at its home, fed stimuli: claims, leases, releases, retries, cancels."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.jobs.backoff import delay
from bodega.jobs.tasks import (
    Policy,
    Task,
    TaskState,
    Verdict,
    after_restart,
    cancel,
    claim,
    expire,
    lapse,
    release,
    renew,
)
from bodega.model.errors import Conflict

POLICY = Policy(max_attempts=3, backoff=1.0, backoff_cap=60.0, lease_seconds=30.0)


def running(worker: str = "w1", now: float = 100.0, policy: Policy = POLICY) -> Task:
    return claim(Task(index=0), policy, worker, now)


def test_a_claim_takes_a_queued_task_with_a_lease() -> None:
    task = claim(Task(index=0), POLICY, "w1", 100.0)
    assert task.state is TaskState.RUNNING
    assert (task.claimant, task.attempts, task.lease_expires_at) == ("w1", 1, 130.0)


def test_of_two_claimants_only_the_first_wins() -> None:
    won = claim(Task(index=0), POLICY, "w1", 100.0)
    with pytest.raises(Conflict) as refused:
        claim(won, POLICY, "w2", 100.1)
    assert refused.value.status == "already_claimed"
    assert "w1" in refused.value.message


def test_a_claim_asked_again_under_its_reference_gets_the_same_task() -> None:
    won = claim(Task(index=0), POLICY, "w1", 100.0, ref="p1.0")
    assert claim(won, POLICY, "w1", 101.0, ref="p1.0") == won
    with pytest.raises(Conflict):
        claim(won, POLICY, "w1", 101.0, ref="p1.1")  # another take: not this one


def test_exit_code_zero_succeeds_and_anything_else_is_a_failed_attempt() -> None:
    assert release(running(), POLICY, "w1", 0, 110.0, 0.5).state is TaskState.SUCCEEDED
    failed = release(running(), POLICY, "w1", 2, 110.0, 0.5)
    assert failed.state is TaskState.QUEUED
    assert failed.exit_codes == (2,)
    assert failed.claimant is None
    assert failed.eligible_at == pytest.approx(110.0 + delay(1, 1.0, 60.0, 0.5))


def test_attempts_run_out_at_max_attempts() -> None:
    task = Task(index=0)
    now = 100.0
    for attempt in range(1, 4):
        now = task.eligible_at + 1
        task = release(claim(task, POLICY, "w1", now), POLICY, "w1", 1, now + 1, 0.0)
        assert task.attempts == attempt
    assert task.state is TaskState.FAILED
    assert task.exit_codes == (1, 1, 1)
    assert "3 of 3 attempts" in task.reason


def test_max_attempts_zero_retries_until_the_deadline() -> None:
    policy = Policy(max_attempts=0, backoff=0.0, backoff_cap=0.0, lease_seconds=30.0,
                    deadline_at=200.0)
    task = Task(index=0)
    for i in range(20):
        task = release(claim(task, policy, "w1", 100.0 + i), policy, "w1", 1, 100.5 + i, 0.0)
        assert task.state is TaskState.QUEUED
    task = release(claim(task, policy, "w1", 150.0), policy, "w1", 1, 201.0, 0.0)
    assert task.state is TaskState.FAILED
    assert "deadline" in task.reason


def test_a_task_given_back_runs_again_at_once_and_its_attempt_is_undone() -> None:
    given_back = release(running(), POLICY, "w1", None, 105.0, 0.9)
    assert given_back.state is TaskState.QUEUED
    assert (given_back.attempts, given_back.exit_codes, given_back.eligible_at) == (0, (), 105.0)


def test_only_the_claimant_may_release() -> None:
    with pytest.raises(Conflict) as refused:
        release(running("w1"), POLICY, "w2", 0, 105.0, 0.0)
    assert refused.value.status == "not_claimant"
    assert "held by w1" in refused.value.message


def test_a_renewal_extends_the_lease_and_says_stop_once_cancelled() -> None:
    task, verdict = renew(running(), POLICY, "w1", 120.0, machine_id="m1")
    assert (verdict, task.lease_expires_at, task.machine_id) == (Verdict.OK, 150.0, "m1")
    _, verdict = renew(cancel(task, 121.0), POLICY, "w1", 122.0)
    assert verdict is Verdict.STOP
    _, verdict = renew(task, POLICY, "w2", 122.0)
    assert verdict is Verdict.LOST


def test_a_lapsed_lease_requeues_the_task_with_its_attempt_counted() -> None:
    task = running(now=100.0)
    assert lapse(task, POLICY, 129.0, 0.0) is None  # still held
    lapsed = lapse(task, POLICY, 131.0, 0.0)
    assert lapsed is not None
    assert lapsed.state is TaskState.QUEUED
    assert (lapsed.attempts, lapsed.exit_codes) == (1, (None,))
    assert "lapsed" in lapsed.reason
    _, verdict = renew(lapsed, POLICY, "w1", 132.0)  # the old claimant hears it lost it
    assert verdict is Verdict.LOST


def test_cancel_drops_a_queued_task_and_marks_a_running_one_to_stop() -> None:
    assert cancel(Task(index=0), 100.0).state is TaskState.CANCELLED
    stopping = cancel(running(), 101.0)
    assert (stopping.state, stopping.stopping) == (TaskState.RUNNING, "cancelled")
    ended = release(stopping, POLICY, "w1", 143, 102.0, 0.0)
    assert (ended.state, ended.exit_codes) == (TaskState.CANCELLED, (143,))
    assert lapse(stopping, POLICY, 200.0, 0.0).state is TaskState.CANCELLED  # type: ignore[union-attr]


def test_the_deadline_fails_queued_tasks_and_stops_running_ones() -> None:
    policy = Policy(3, 1.0, 60.0, 30.0, deadline_at=150.0)
    assert expire(Task(index=0), policy, 149.0) is None
    assert expire(Task(index=0), policy, 150.0).state is TaskState.FAILED  # type: ignore[union-attr]
    stopping = expire(running(policy=policy), policy, 151.0)
    assert stopping is not None
    assert stopping.stopping == "deadline"
    assert release(stopping, policy, "w1", 143, 152.0, 0.0).state is TaskState.FAILED
    with pytest.raises(Conflict):
        claim(Task(index=0), policy, "w1", 151.0)


def test_a_backoff_waits_before_a_claim() -> None:
    failed = release(running(), POLICY, "w1", 1, 110.0, 1.0)
    with pytest.raises(Conflict) as refused:
        claim(failed, POLICY, "w2", 110.1)
    assert refused.value.status == "backoff"
    assert claim(failed, POLICY, "w2", failed.eligible_at).claimant == "w2"


def test_after_a_restart_of_the_home_no_lease_lapses_before_a_full_term() -> None:
    task = running(now=100.0)
    assert after_restart(task, POLICY, 200.0).lease_expires_at == 230.0
    assert after_restart(task, POLICY, 50.0).lease_expires_at == 130.0


@given(failures=st.integers(0, 80), base=st.floats(0.01, 100), cap=st.floats(0.01, 1000),
       u=st.floats(0, 1))
def test_backoff_is_capped_and_never_under_half_its_delay(failures: int, base: float,
                                                         cap: float, u: float) -> None:
    wait = delay(failures, base, cap, u)
    if failures == 0:
        assert wait == 0
        return
    full = min(cap, base * 2 ** (failures - 1))
    assert full / 2 - 1e-9 <= wait <= full + 1e-9


def test_backoff_doubles_per_failure() -> None:
    assert [delay(n, 1.0, 60.0, 1.0) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_the_end_of_an_earlier_attempt_does_not_end_the_next_one() -> None:
    # Attempt 1 failed and was retried on the same worker: a late copy of attempt 1's
    # release (its report sent twice) must not end attempt 2 with attempt 1's exit code.
    first = running()
    queued = release(first, POLICY, "w1", 1, 101.0, 0.0)
    second = claim(queued, POLICY, "w1", 110.0)
    assert second.attempts == 2
    with pytest.raises(Conflict) as refused:
        release(second, POLICY, "w1", 1, 111.0, 0.0, attempt=1)
    assert refused.value.status == "not_claimant"
    assert "attempt 1" in refused.value.message
    ended = release(second, POLICY, "w1", 0, 112.0, 0.0, attempt=2)
    assert (ended.state, ended.exit_codes) == (TaskState.SUCCEEDED, (1, 0))


def test_a_renewal_of_an_earlier_attempt_is_told_it_lost_the_task() -> None:
    # The worker stops what it is told it lost: that must be the earlier attempt's machine,
    # never the next attempt's, which the same worker runs and renews as its own.
    second = claim(release(running(), POLICY, "w1", 1, 101.0, 0.0), POLICY, "w1", 110.0)
    after, verdict = renew(second, POLICY, "w1", 111.0, attempt=1)
    assert (after, verdict) == (second, Verdict.LOST)
    after, verdict = renew(second, POLICY, "w1", 111.0, attempt=2)
    assert verdict is Verdict.OK
    assert after.lease_expires_at == 141.0


def test_an_end_names_the_machine_a_task_ran_in_when_no_renewal_did() -> None:
    ended = release(running(), POLICY, "w1", 0, 101.0, 0.5, machine_id="m1")
    assert (ended.state, ended.machine_id) == (TaskState.SUCCEEDED, "m1")
    renewed, _ = renew(running(), POLICY, "w1", 100.5, "m1")
    assert release(renewed, POLICY, "w1", 3, 101.0, 0.5).machine_id is None  # requeued
    assert release(renewed, POLICY, "w1", 0, 101.0, 0.5).machine_id == "m1"  # kept
