"""The worker's pure core: stimuli in, decisions out; no SQLite, no driver, no sleeps."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, BodegaError, NotFound, PreconditionFailed
from bodega.model.machine import ExitStatus
from bodega.model.machine_config import MachineConfig
from bodega.model.states import RELEASES_COMPUTE, MachineState
from bodega.worker.core.decisions import (
    Changes,
    CheckResult,
    Cordon,
    Create,
    Destroy,
    ExitDecision,
    ExitObserved,
    OperationEnded,
    OperationFailed,
    Recovered,
    Restart,
    SetMetadata,
    Signal,
    Start,
    StepEntered,
    Stimulus,
    Stop,
    Then,
    Update,
)
from bodega.worker.core.fsm import FSMS
from bodega.worker.core.payloads import (
    CreateMachine,
    DestroyMachine,
    ExitMachine,
    RestartMachine,
    StartMachine,
    UpdateMachine,
)
from bodega.worker.core.policy import BEGINS, RESTART_WINDOW, restart_delay
from bodega.worker.core.records import MachineRow
from bodega.worker.core.rules import decide
from bodega.worker.drivers.base import TaskHandle

S = MachineState


def config(**extra: Any) -> MachineConfig:
    return MachineConfig.model_validate(
        {"image": "app:1", "guest": {"cpus": 1, "memory_mb": 256}, **extra})


def record(state: str = S.STARTED, **changes: Any) -> MachineRow:
    handle = TaskHandle(driver="fake", machine_id="m1", instance_id="v1", start_seq=3,
                        pid=10, started_at=1000.0)
    row = MachineRow(
        id="m1", app="web", name="m", region="ams", state=state, instance_id="v1",
        config=config(), millicpus=62, memory_mb=256, gpus=0, gpu_kind=None, ip_index=2,
        private_ip="10.0.0.2", netns=None, cordoned=False,
        holds_compute=state not in RELEASES_COMPUTE, handle=handle, start_seq=3, restarts=0,
        volume_id=None, placement_json=None, idempotency_key=None, last_exit=None,
        created_at=0.0, updated_at=0.0,
    )
    return replace(row, **changes)


def exit_of(row: MachineRow, code: int = 1, now: float = 1001.0,
            draining: bool = False) -> ExitObserved:
    assert row.handle is not None
    return ExitObserved(row.handle.instance_id, row.handle.start_seq, ExitStatus(exit_code=code),
                        now, draining)


# -- user calls -----------------------------------------------------------------------------


def test_start_from_stopped_checks_room_resets_restarts_and_begins_a_start() -> None:
    row = record(S.STOPPED, restarts=4)
    decision = decide(row, Start())
    assert decision.room == Ask.for_config(row.config)
    assert (decision.changes.holds_compute, decision.changes.start_seq,
            decision.changes.restarts) == (True, 4, 0)
    assert decision.begin == StartMachine(source="user", start_seq=4, delay=0.0)


def test_start_of_a_started_machine_is_already_there_and_a_destroying_one_is_refused() -> None:
    assert decide(record(S.STARTED), Start()).already
    with pytest.raises(PreconditionFailed, match="cannot start machine m1 in state destroying"):
        decide(record(S.DESTROYING), Start())


def test_restart_takes_the_next_start_seq_and_keeps_the_signal() -> None:
    decision = decide(record(), Restart(signal="SIGTERM", timeout=2.0))
    assert decision.changes.start_seq == 4
    assert decision.begin == RestartMachine(source="user", signal="SIGTERM", timeout=2.0,
                                            start_seq=4)


def test_update_of_a_started_machine_launches_even_with_skip_launch() -> None:
    new = config(env={"V": "2"})
    decision = decide(record(), Update(new, "v2", 62, skip_launch=True))
    assert decision.room is not None
    assert decision.room_is_conflict
    assert decision.new_version
    assert decision.changes.config == new
    assert decision.changes.instance_id == "v2"
    assert isinstance(decision.begin, UpdateMachine)
    assert decision.begin.launch is True


def test_update_of_a_stopped_machine_with_skip_launch_needs_no_room_and_rests_stopped() -> None:
    decision = decide(record(S.STOPPED), Update(config(), "v2", 62, skip_launch=True))
    assert decision.room is None
    assert decision.changes.holds_compute is False
    assert decision.begin == UpdateMachine(source="user", launch=False, rest_state="stopped",
                                           start_seq=3)


def test_destroy_refuses_a_started_machine_unless_forced_and_a_destroyed_one_is_gone() -> None:
    with pytest.raises(PreconditionFailed, match="use force=true"):
        decide(record(), Destroy())
    forced = decide(record(), Destroy(force=True))
    assert forced.begin == DestroyMachine(source="user", signal="SIGKILL", timeout=0.0)
    with pytest.raises(NotFound):
        decide(record(S.DESTROYED), Destroy())


def test_signal_needs_a_started_machine() -> None:
    assert decide(record(), Signal()).begin is None
    with pytest.raises(PreconditionFailed, match="not started"):
        decide(record(S.STOPPED), Signal())


def test_cordon_and_metadata_change_the_record_and_are_logged_as_actions() -> None:
    cordon = decide(record(), Cordon(True))
    assert cordon.changes == Changes(cordoned=True)
    assert [(n.fsm, n.step) for n in cordon.notes] == [("action", "cordon")]
    row = record(config=config(metadata={"a": "1", "b": "2"}))
    decision = decide(row, SetMetadata({"a": None, "c": "3"}, version="v1"))
    assert decision.changes.config is not None
    assert decision.changes.config.metadata == {"b": "2", "c": "3"}
    with pytest.raises(PreconditionFailed, match="machine_version v0"):
        decide(row, SetMetadata({"a": "x"}, version="v0"))
    with pytest.raises(BadRequest, match="1-128 characters"):
        decide(row, SetMetadata({"": "x"}))
    with pytest.raises(BadRequest, match="at most 64"):
        decide(row, SetMetadata({f"k{i}": "v" for i in range(65)}))


# -- exits and the restart policy --------------------------------------------------------------


def test_a_crash_restarts_after_a_backoff_counting_the_restart() -> None:
    row = record(restarts=2)
    decision = decide(row, exit_of(row, code=1))
    assert decision.exit_decision is ExitDecision.RESTART
    assert decision.room is None  # a started machine already holds its room
    assert (decision.changes.restarts, decision.changes.start_seq) == (3, 4)
    assert decision.changes.last_exit == ExitStatus(exit_code=1)
    assert decision.begin == StartMachine(source="flyd", start_seq=4, delay=restart_delay(2))
    assert [(n.step, n.event.type, n.event.status) for n in decision.notes if n.event] == [
        ("exit", "exit", "restarting")]


def test_a_long_run_forgives_past_crashes() -> None:
    row = record(restarts=10)
    decision = decide(row, exit_of(row, now=1000.0 + RESTART_WINDOW + 1))
    assert decision.exit_decision is ExitDecision.RESTART
    assert decision.changes.restarts == 1


def test_a_clean_exit_comes_to_rest_through_its_own_operation() -> None:
    row = record()
    decision = decide(row, exit_of(row, code=0))
    assert decision.exit_decision is ExitDecision.STOP
    assert decision.changes.state is None  # the exit_machine operation's step writes it
    assert decision.begin == ExitMachine(source="flyd")
    assert [(n.step, n.event.type, n.event.status) for n in decision.notes if n.event] == [
        ("exit", "exit", "stopped")]


def test_draining_never_restarts_and_auto_destroy_destroys() -> None:
    row = record()
    assert decide(row, exit_of(row, draining=True)).exit_decision is ExitDecision.STOP
    doomed = record(config=config(auto_destroy=True, restart={"policy": "no"}))
    decision = decide(doomed, exit_of(doomed))
    assert decision.begin is not None
    assert decision.begin.fsm == "destroy_machine"


def test_an_exit_of_an_older_run_or_of_a_stopping_machine_changes_nothing() -> None:
    row = record()
    stale = ExitObserved("v1", 2, ExitStatus(exit_code=1), 1001.0, False)
    assert decide(row, stale) == decide(row, CheckResult("http", "passing", "ok", "t", 2))
    assert decide(record(S.STOPPING), exit_of(row)).begin is None


# -- steps and operation ends ----------------------------------------------------------------


def test_a_create_that_was_asked_to_launch_begins_its_start_in_the_same_commit() -> None:
    row = record(S.CREATED, start_seq=0)
    decision = decide(row, StepEntered("created", CreateMachine(launch=True)))
    assert decision.changes.state == S.CREATED
    # ``attached``: its ``starting`` need not attach the network the create just attached.
    assert decision.begin == StartMachine(source="flyd", start_seq=1, delay=0.0, attached=True)
    quiet = decide(row, StepEntered("created", CreateMachine(launch=False)))
    assert quiet.begin is None


def test_the_end_of_a_destroy_gives_back_compute_volume_and_lease() -> None:
    decision = decide(record(S.DESTROYING), StepEntered("destroyed", DestroyMachine()))
    assert decision.changes.state == S.DESTROYED
    assert decision.changes.holds_compute is False
    assert decision.changes.clear_handle
    assert decision.release


def test_a_failed_operation_rests_in_its_error_state_and_frees_compute() -> None:
    decision = decide(record(S.STARTING), OperationFailed("start_machine"))
    assert (decision.changes.state, decision.changes.holds_compute) == (S.FAILED, False)
    assert decide(record(S.DESTROYING), OperationFailed("destroy_machine")).changes.state is None


def test_what_follows_an_operation_is_declared_with_its_state_machine() -> None:
    assert decide(record(), OperationEnded("start_machine")).then == {Then.WATCH}
    assert decide(record(S.FAILED), OperationEnded("start_machine")).then == frozenset()
    assert decide(record(S.STOPPED), OperationEnded("exit_machine")).then == {
        Then.SPARES_CHANGED}
    assert decide(record(), Recovered()).then == {Then.WATCH}


# -- properties ------------------------------------------------------------------------------

user_calls = st.one_of(
    st.just(Start()), st.builds(Stop), st.builds(Restart), st.builds(Destroy, st.booleans()),
    st.builds(Update, st.just(config()), st.just("v2"), st.just(62), st.booleans()),
)
everything: st.SearchStrategy[Stimulus] = st.one_of(
    user_calls, st.just(Signal()), st.just(Recovered()), st.builds(Cordon, st.booleans()),
    st.builds(SetMetadata, st.dictionaries(st.text(max_size=3), st.none() | st.text())),
    st.builds(ExitObserved, st.just("v1"), st.integers(2, 4),
              st.builds(ExitStatus, st.integers(0, 2)), st.floats(1000, 2000), st.booleans()),
)
states = st.sampled_from(list(MachineState))


@given(states, user_calls, st.booleans())
def test_an_operation_begins_only_where_begins_allows(state: str, stimulus: Stimulus,
                                                       holds: bool) -> None:
    try:
        decision = decide(record(state, holds_compute=holds), stimulus)
    except BodegaError:
        return
    if decision.begin is not None:
        assert state in BEGINS[decision.begin.fsm]
    if decision.room is not None:
        assert decision.changes.holds_compute is True


@given(states, everything)
def test_only_the_steps_of_operations_write_a_machines_state(state: str,
                                                             stimulus: Stimulus) -> None:
    try:
        decision = decide(record(state), stimulus)
    except BodegaError:
        return
    assert decision.changes.state is None
    if decision.begin is not None:
        assert decision.begin.fsm in FSMS


def test_create_records_the_machine_created_and_begins_its_create() -> None:
    decision = decide(None, Create(launch=False))
    assert (decision.changes.state, decision.changes.holds_compute) == (S.CREATED, True)
    assert decision.begin == CreateMachine(source="user", launch=False)
    with pytest.raises(NotFound):
        decide(None, Start())
