"""A machine's move as its source decides it (``core/moves.py``): stimulus in, decision out."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bodega.model.errors import BadRequest, Conflict, PreconditionFailed
from bodega.model.machine_config import MachineConfig
from bodega.model.states import MachineState
from bodega.worker.core.decisions import Forget, Move, OperationFailed, StepEntered, Then
from bodega.worker.core.fsm import FSMS
from bodega.worker.core.moves import live_refusal
from bodega.worker.core.payloads import MoveMachine, StartMachine
from bodega.worker.core.rules import decide

from .test_core import config, record

S = MachineState
MOVE = Move(move_id="m1", source="w1", target="w2", target_url="https://w2:1",
            reason="drain")


def begun(state: str = S.STARTED, **changes: object) -> MoveMachine:
    payload = decide(record(state, **changes), MOVE).begin
    assert isinstance(payload, MoveMachine)
    return payload


def test_a_running_machine_is_stopped_then_started_there() -> None:
    payload = begun(S.STARTED)
    assert (payload.was_running, payload.resting, payload.target, payload.reason) == (
        True, "stopping", "w2", "drain")
    assert payload.generation == 1
    assert payload.signal is None  # its stop_config's signal and timeout


@pytest.mark.parametrize("state", [S.STOPPED, S.CREATED, S.FAILED])
def test_a_resting_machine_moves_as_it_rests(state: str) -> None:
    payload = begun(state)
    assert (payload.was_running, payload.resting) == (False, state)


def test_each_move_raises_the_generation() -> None:
    assert begun(S.STOPPED, generation=4).generation == 5


def test_a_move_is_refused_to_its_own_worker_twice_or_suspended() -> None:
    with pytest.raises(BadRequest):
        decide(record(), replace(MOVE, target="w1"))
    with pytest.raises(Conflict):
        decide(record(), replace(MOVE, running_move=True))
    with pytest.raises(PreconditionFailed):
        decide(record(S.SUSPENDED), MOVE)


def test_a_machine_with_a_volume_takes_its_data_first_and_drops_it_last() -> None:
    payload = begun(S.STOPPED, volume_id="vol_1")
    assert payload.volume_id == "vol_1"
    steps = [FSMS["move_machine"].first(payload).name]
    while not FSMS["move_machine"].step(steps[-1]).final:
        steps.append(FSMS["move_machine"].after(steps[-1], payload).name)
    assert steps == ["moving", "copying", "handoff", "teardown", "dropping", "moved"]
    without = begun(S.STOPPED)
    assert FSMS["move_machine"].after("moving", without).name == "handoff"
    assert FSMS["move_machine"].after("teardown", without).name == "moved"


def test_a_copy_that_fails_rolls_back_and_a_drop_that_fails_does_not() -> None:
    payload = begun(S.STARTED, volume_id="vol_1")
    copying = replace(payload, error="digest differs", failed_step="copying")
    assert isinstance(decide(record(S.STOPPED), OperationFailed("move_machine", copying)
                             ).begin, StartMachine)
    dropping = replace(payload, error="busy", failed_step="dropping")
    assert decide(record(S.STOPPED), OperationFailed("move_machine", dropping)
                  ).forget == Forget("w2", 1)


def test_its_last_step_forgets_the_record() -> None:
    payload = begun()
    decision = decide(record(S.STOPPED), StepEntered("moved", payload))
    assert decision.forget == Forget("w2", 1)


def test_a_refused_handoff_starts_a_running_machine_again_here() -> None:
    payload = replace(begun(), error="cordoned", failed_step="handoff")
    decision = decide(record(S.STOPPED, holds_compute=False),
                      OperationFailed("move_machine", payload))
    assert isinstance(decision.begin, StartMachine)
    assert decision.forget is None
    assert decision.room is not None  # it claims its room again, checked in the commit


def test_a_refused_handoff_leaves_a_stopped_machine_stopped() -> None:
    payload = replace(begun(S.STOPPED), error="no room", failed_step="handoff")
    decision = decide(record(S.STOPPED), OperationFailed("move_machine", payload))
    assert decision.begin is None
    assert decision.changes.state == S.STOPPED


def test_a_teardown_that_fails_after_the_handoff_forgets_it_all_the_same() -> None:
    payload = replace(begun(), error="busy", failed_step="teardown")
    decision = decide(record(S.STOPPED), OperationFailed("move_machine", payload))
    assert decision.forget == Forget("w2", 1)
    assert decision.begin is None  # never a second copy here


def test_a_start_that_found_no_room_starts_it_there_but_never_again_here() -> None:
    payload = decide(record(S.STOPPED), replace(MOVE, start=True)).begin
    assert isinstance(payload, MoveMachine)
    assert (payload.start_there, payload.was_running) == (True, False)
    failed = replace(payload, error="no room", failed_step="handoff")
    assert decide(record(S.STOPPED), OperationFailed("move_machine", failed)).begin is None


def vm_config(**extra: object) -> MachineConfig:
    return config(image="registry.test/app:1",
                  guest={"cpus": 1, "memory_mb": 256, "isolation": "vm"}, **extra)


def live_steps(payload: MoveMachine) -> list[str]:
    steps = [FSMS["move_machine"].first(payload).name]
    while not FSMS["move_machine"].step(steps[-1]).final:
        steps.append(FSMS["move_machine"].after(steps[-1], payload).name)
    return steps


def test_a_running_vm_moves_live_never_stopped_here() -> None:
    payload = begun(S.STARTED, config=vm_config())
    assert (payload.live, payload.was_running, payload.resting) == (True, True, S.STARTED)
    assert live_steps(payload) == ["leaving", "handing", "migrating", "teardown", "moved"]
    machine = FSMS["move_machine"]
    # The machine is started here until the target has it: its state never says stopped.
    assert {machine.step(name).state_for(payload)
            for name in ("leaving", "handing", "migrating")} == {S.STARTED}
    assert live_steps(begun(S.STARTED)) == ["moving", "handoff", "teardown", "moved"]


@pytest.mark.parametrize(("changes", "why"), [
    ({}, "it is not a vm machine"),
    ({"config": vm_config(), "volume_id": "vol_1"}, "virtiofs"),
    ({"config": vm_config(init={"swap_size_mb": 64})}, "swap disk"),
    ({"config": vm_config(), "state": S.STOPPED}, "not running"),
])
def test_another_machine_moves_as_it_always_did_and_says_why(
        changes: dict[str, object], why: str) -> None:
    state = changes.pop("state", S.STARTED)
    row = record(str(state), **changes)
    refusal = live_refusal(row)
    assert refusal is not None
    assert why in refusal
    payload = decide(row, MOVE).begin
    assert isinstance(payload, MoveMachine)
    assert not payload.live


@pytest.mark.parametrize("step", ["leaving", "handing"])
def test_a_live_move_refused_before_the_target_took_it_leaves_the_vm_running_here(
        step: str) -> None:
    payload = replace(begun(S.STARTED, config=vm_config()), error="no room", failed_step=step)
    decision = decide(record(S.STARTED, config=vm_config()),
                      OperationFailed("move_machine", payload))
    assert decision.begin is None  # no second start: its qemu never stopped
    assert decision.forget is None
    assert decision.changes.state == S.STARTED
    assert Then.WATCH in decision.then


def test_a_live_move_that_failed_after_the_target_took_it_is_forgotten_here() -> None:
    payload = replace(begun(S.STARTED, config=vm_config()), error="gone",
                      failed_step="migrating")
    decision = decide(record(S.STARTED, config=vm_config()),
                      OperationFailed("move_machine", payload))
    assert decision.forget == Forget("w2", 1)
    assert decision.begin is None
