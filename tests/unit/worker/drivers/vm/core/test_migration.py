"""A VM's suspend and resume steps from what QMP says of its vCPUs and its migration."""

from __future__ import annotations

import pytest

from bodega.worker.drivers.vm.core.migration import (
    ArrivalStep,
    LiveStep,
    Migration,
    ResumeStep,
    RunStatus,
    SuspendStep,
    arrival_step,
    live_step,
    resume_step,
    suspend_step,
)


def run(status: str) -> RunStatus:
    return RunStatus.model_validate({"status": status, "running": status == "running",
                                     "singlestep": False})


def migration(answer: dict[str, object]) -> Migration:
    return Migration.model_validate(answer)


def test_query_migrate_is_read_for_its_status_and_why_it_failed() -> None:
    assert migration({}).status == "none"  # no migration yet: qemu answers {}
    assert not migration({}).ended()
    assert not migration({"status": "active", "ram": {"total": 1}}).ended()
    assert migration({"status": "completed", "total-time": 531}).ended()
    with pytest.raises(ValueError, match="failed: Unable to write to command"):
        migration({"status": "failed", "error-desc": "Unable to write to command"}).ended()
    with pytest.raises(ValueError, match="cancelled"):
        migration({"status": "cancelled"}).ended()
    assert migration({"status": "device"}).under_way
    assert not migration({"status": "completed"}).under_way


@pytest.mark.parametrize(("state", "migrating", "partial", "snapshot", "step"), [
    ("running", {}, False, False, SuspendStep.MIGRATE),
    # A snapshot from an earlier stop of a VM that ran since is written afresh.
    ("running", {"status": "completed"}, False, True, SuspendStep.MIGRATE),
    ("paused", {"status": "active"}, True, False, SuspendStep.WAIT),
    ("postmigrate", {"status": "completed"}, True, False, SuspendStep.KEEP),
    ("postmigrate", {"status": "completed"}, False, True, SuspendStep.QUIT),
    # Stopped, but its migration failed or never began: migrate again.
    ("paused", {"status": "failed"}, True, False, SuspendStep.MIGRATE),
    ("paused", {}, False, False, SuspendStep.MIGRATE),
    # The partial file went (not this qemu's): a whole one is written afresh.
    ("postmigrate", {"status": "completed"}, False, False, SuspendStep.MIGRATE),
])
def test_a_suspend_goes_on_from_the_step_it_was_in(
        state: str, migrating: dict[str, object], partial: bool, snapshot: bool,
        step: SuspendStep) -> None:
    assert suspend_step(run(state), migration(migrating), partial, snapshot) is step


@pytest.mark.parametrize(("state", "migrating", "step"), [
    ("running", {"status": "completed"}, ResumeStep.ADOPT),
    ("paused", {"status": "completed"}, ResumeStep.CONT),  # loaded, vCPUs not yet let go
    ("postmigrate", {"status": "completed"}, ResumeStep.CONT),  # the suspend's own qemu
    ("inmigrate", {}, ResumeStep.REDO),  # never given its snapshot
    ("inmigrate", {"status": "active"}, ResumeStep.REDO),
    ("paused", {"status": "active"}, ResumeStep.REDO),
])
def test_a_resume_that_finds_a_qemu_keeps_it_only_once_its_state_is_loaded(
        state: str, migrating: dict[str, object], step: ResumeStep) -> None:
    assert resume_step(run(state), migration(migrating)) is step


@pytest.mark.parametrize(("status", "answer", "step"), [
    ("running", {}, LiveStep.MIGRATE),  # the first try
    ("running", {"status": "failed", "error-desc": "Broken pipe"}, LiveStep.MIGRATE),
    ("running", {"status": "cancelled"}, LiveStep.MIGRATE),
    ("running", {"status": "active"}, LiveStep.WAIT),  # an earlier try's, its relay gone
    ("finish-migrate", {"status": "device"}, LiveStep.WAIT),
    ("postmigrate", {"status": "completed", "downtime": 41}, LiveStep.SWITCH),
    ("paused", {"status": "failed"}, LiveStep.CONT),  # stopped by a failure: run, then again
    ("postmigrate", {"status": "failed"}, LiveStep.CONT),
])
def test_a_live_moves_source_goes_on_from_what_its_qemu_says(
        status: str, answer: dict[str, object], step: LiveStep) -> None:
    assert live_step(run(status), migration(answer)) is step


def test_a_completed_migration_says_its_downtime() -> None:
    done = migration({"status": "completed", "downtime": 41, "total-time": 2210})
    assert (done.downtime, done.total_time) == (41, 2210)


@pytest.mark.parametrize(("status", "answer", "step"), [
    ("inmigrate", {}, ArrivalStep.LISTEN),  # waits for the source's state
    ("inmigrate", {"status": "active"}, ArrivalStep.WAIT),  # taking it
    ("paused", {"status": "completed"}, ArrivalStep.CONT),  # all came: let it run
    ("postmigrate", {"status": "completed"}, ArrivalStep.CONT),
    ("running", {"status": "completed"}, ArrivalStep.RUNS),  # an earlier switch's
    ("paused", {"status": "failed"}, ArrivalStep.WAIT),  # never runs a half-loaded VM
])
def test_a_live_moves_target_goes_on_from_what_its_qemu_says(
        status: str, answer: dict[str, object], step: ArrivalStep) -> None:
    assert arrival_step(run(status), migration(answer)) is step
