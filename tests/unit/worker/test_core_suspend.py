"""Suspend and resume in the worker's pure core: stimuli in, decisions out."""

from __future__ import annotations

import pytest

from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, PreconditionFailed
from bodega.model.states import RELEASES_COMPUTE, MachineState
from bodega.worker.core.decisions import (
    Changes,
    Destroy,
    OperationFailed,
    Recovered,
    Start,
    StepEntered,
    Stop,
    Suspend,
    Then,
    Update,
)
from bodega.worker.core.fsm import FSMS
from bodega.worker.core.payloads import EndsRun, ResumeMachine, SuspendMachine
from bodega.worker.core.rules import decide

from .test_core import config, record

S = MachineState


def test_suspend_of_a_started_machine_begins_a_suspend() -> None:
    decision = decide(record(S.STARTED), Suspend(can_suspend=True))
    assert decision.begin == SuspendMachine(source="user")
    assert decision.room is None
    assert decision.changes == Changes()


def test_suspend_of_a_suspended_machine_is_already_done() -> None:
    decision = decide(record(S.SUSPENDED), Suspend(can_suspend=True))
    assert decision.already
    assert decision.begin is None


@pytest.mark.parametrize("state", [S.CREATED, S.STOPPED, S.FAILED, S.STARTING, S.STOPPING,
                                   S.SUSPENDING, S.DESTROYING, S.UPDATING])
def test_suspend_elsewhere_is_a_precondition_failure(state: str) -> None:
    with pytest.raises(PreconditionFailed) as caught:
        decide(record(state), Suspend(can_suspend=True))
    assert caught.value.http_status == 412
    assert f"cannot suspend machine m1 in state {state}" in caught.value.message


def test_a_driver_that_cannot_suspend_answers_400_unimplemented() -> None:
    with pytest.raises(BadRequest) as caught:
        decide(record(S.STARTED), Suspend(can_suspend=False))
    assert caught.value.http_status == 400
    assert caught.value.status == "unimplemented"
    assert "suspend is not supported" in caught.value.message


def test_fly_limits_refuse_big_and_scheduled_machines() -> None:
    big = record(S.STARTED, config=config(guest={"cpus": 1, "memory_mb": 4096}))
    with pytest.raises(PreconditionFailed, match="at most 2048 MB"):
        decide(big, Suspend(can_suspend=True))
    scheduled = record(S.STARTED, config=config(schedule="hourly"))
    with pytest.raises(PreconditionFailed, match="schedule"):
        decide(scheduled, Suspend(can_suspend=True))


def test_a_vm_with_a_volume_is_not_suspended_a_container_with_one_is() -> None:
    mounts = [{"volume": "vol_1", "path": "/data"}]
    vm = record(S.STARTED, config=config(image="r.example/web:1", mounts=mounts,
                                         guest={"cpus": 1, "memory_mb": 256,
                                                "isolation": "vm"}))
    with pytest.raises(PreconditionFailed, match="a vm with a volume cannot be suspended"):
        decide(vm, Suspend(can_suspend=True))
    container = record(S.STARTED, config=config(image="r.example/web:1", mounts=mounts))
    assert decide(container, Suspend(can_suspend=True)).begin == SuspendMachine()


def test_entering_the_suspend_steps_moves_the_state_and_keeps_compute() -> None:
    row = record(S.STARTED)
    suspending = decide(row, StepEntered("suspending", SuspendMachine(source="user")))
    assert suspending.changes.state == S.SUSPENDING
    suspended = decide(row, StepEntered("suspended", SuspendMachine(source="user")))
    assert suspended.changes.state == S.SUSPENDED
    # Its memory stays resident: the machine goes on holding its compute.
    assert suspended.changes.holds_compute is None
    assert S.SUSPENDED not in RELEASES_COMPUTE
    assert FSMS["suspend_machine"].step("suspended").event == ("suspend", "suspended")


def test_a_failed_freeze_leaves_it_started_and_a_failed_thaw_suspended() -> None:
    assert decide(record(S.SUSPENDING), OperationFailed("suspend_machine")).changes.state \
        == S.STARTED
    assert decide(record(S.STARTING), OperationFailed("resume_machine")).changes.state \
        == S.SUSPENDED


def test_start_of_a_suspended_machine_resumes_the_same_run() -> None:
    row = record(S.SUSPENDED, restarts=2)
    decision = decide(row, Start())
    assert decision.begin == ResumeMachine(source="user")
    assert decision.room is None  # it kept its room
    assert decision.changes.start_seq is None
    assert decision.changes.restarts is None
    started = decide(row, StepEntered("started", ResumeMachine(source="user")))
    assert started.changes.state == S.STARTED
    assert FSMS["resume_machine"].step("resuming").event == ("start", "starting")


def test_a_suspended_record_without_compute_checks_room_before_resuming() -> None:
    row = record(S.SUSPENDED, holds_compute=False)
    decision = decide(row, Start())
    assert decision.room == Ask.for_config(row.config)
    assert decision.changes.holds_compute is True


@pytest.mark.parametrize(("stimulus", "fsm"), [
    (Stop(), "stop_machine"), (Destroy(), "destroy_machine"),
    (Update(config(env={"A": "1"}), "v2", 62), "update_machine"),
])
def test_ending_a_suspended_run_thaws_it_first(stimulus: Stop | Destroy | Update,
                                               fsm: str) -> None:
    decision = decide(record(S.SUSPENDED), stimulus)
    assert isinstance(decision.begin, EndsRun)
    assert decision.begin.fsm == fsm
    assert decision.begin.thaw is True
    started = decide(record(S.STARTED), Stop())
    assert isinstance(started.begin, EndsRun)
    assert started.begin.thaw is False


def test_a_restarted_worker_re_adopts_a_suspended_machine() -> None:
    assert decide(record(S.SUSPENDED), Recovered()).then == frozenset({Then.WATCH})
    assert decide(record(S.SUSPENDED, handle=None), Recovered()).then == frozenset()
