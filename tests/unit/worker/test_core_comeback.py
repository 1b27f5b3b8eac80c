"""Which machines come back with their host, as pure rules: every state, policy and stop.

A host's bodega that stops gracefully stops its machines (``HostStop``) and marks those
that were started; the worker that comes back starts those again (``Recovered``). A host
that went down leaves runs the worker finds over with no word of how they ended
(``ExitObserved`` of a ``lost`` exit). Either way ``comes_back`` decides: not with
policy ``no``, not a standby.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from bodega.model.errors import BodegaError
from bodega.model.machine import ExitStatus
from bodega.model.states import MachineState
from bodega.worker.core.decisions import (
    Changes,
    Decision,
    ExitDecision,
    ExitObserved,
    HostStop,
    Recovered,
    Start,
    Stop,
    Then,
    Update,
)
from bodega.worker.core.payloads import DestroyMachine, ExitMachine, StartMachine, StopMachine
from bodega.worker.core.policy import BEGINS, HOST_RESTARTED, HOST_STOPPING
from bodega.worker.core.records import MachineRow
from bodega.worker.core.rules import decide

from .test_core import config, record

S = MachineState
POLICIES = (None, "no", "always", "on-failure")  # None: the API's default, on-failure
STATES = tuple(S)


def machine(state: str, policy: str | None = None, standby: bool = False,
            **changes: Any) -> MachineRow:
    extra: dict[str, Any] = {}
    if policy is not None:
        extra["restart"] = {"policy": policy}
    if standby:
        extra["standbys"] = ["m0"]
    return replace(record(state), config=config(**extra), **changes)


def returns(policy: str | None, standby: bool) -> bool:
    return policy != "no" and not standby


def lost_exit(row: MachineRow, draining: bool = False, code: int | None = None) -> ExitObserved:
    assert row.handle is not None
    status = ExitStatus(exit_code=code if code is not None else 137, signal=9, lost=True)
    return ExitObserved(row.handle.instance_id, row.handle.start_seq, status, 1001.0, draining)


# -- the host's graceful stop ----------------------------------------------------------------


@pytest.mark.parametrize("state", [s for s in BEGINS["stop_machine"]])
def test_the_hosts_stop_stops_like_a_call_and_marks_only_a_started_machine(state: str) -> None:
    decision = decide(machine(state), HostStop(timeout=5.0))
    call = decide(machine(state), Stop(timeout=5.0))
    if call.already:
        assert decision == Decision(already=True)
        return
    assert isinstance(decision.begin, StopMachine)
    assert (decision.begin.source, decision.begin.reason, decision.begin.timeout) == (
        "flyd", HOST_STOPPING, 5.0)
    assert decision.begin.thaw == call.begin.thaw  # type: ignore[union-attr]
    assert decision.changes.host_stopped == (True if state == S.STARTED else None)


@pytest.mark.parametrize("state", [s for s in STATES if s not in BEGINS["stop_machine"]])
def test_the_hosts_stop_refuses_where_a_stop_would(state: str) -> None:
    with pytest.raises(BodegaError) as refused:
        decide(machine(state), HostStop(timeout=5.0))
    with pytest.raises(type(refused.value)):
        decide(machine(state), Stop())


# -- the worker's return ---------------------------------------------------------------------


@pytest.mark.parametrize(("state", "policy", "host_stopped", "standby"), list(itertools.product(
    STATES, POLICIES, (True, False), (False, True))))
def test_a_returning_worker_starts_exactly_what_its_host_stopped_started(
        state: str, policy: str | None, host_stopped: bool, standby: bool) -> None:
    row = machine(state, policy, standby, host_stopped=host_stopped, restarts=7)
    decision = decide(row, Recovered())
    if state in (S.STARTED, S.SUSPENDED):  # a run outlived the worker: re-adopted, unmarked
        assert decision.then == frozenset({Then.WATCH})
        assert decision.begin is None
    elif not host_stopped:  # the user stopped it, it exited on its own, or never started
        assert decision == Decision()
    elif state == S.STOPPED and returns(policy, standby):
        assert decision.begin == StartMachine(source="flyd", reason=HOST_RESTARTED,
                                              start_seq=row.start_seq + 1, delay=0.0)
        assert decision.changes.host_stopped is False  # in the commit that begins the start
        assert decision.changes.restarts == 0  # not a crash of its own
        assert decision.room is not None  # it gave its room back when it stopped
    else:  # it stays where it rests, and is not looked at again
        assert decision == Decision(changes=Changes(host_stopped=False))


def test_a_return_already_decided_starts_nothing_twice() -> None:
    row = machine(S.STOPPED, "always", host_stopped=True)
    first = decide(row, Recovered())
    assert first.begin is not None
    after = replace(row, state=S.STARTING, host_stopped=bool(first.changes.host_stopped),
                    start_seq=first.changes.start_seq or 0, handle=None)
    assert decide(after, Recovered()) == Decision()


def test_a_user_start_or_update_settles_the_mark() -> None:
    row = machine(S.STOPPED, "always", host_stopped=True)
    assert decide(row, Start()).changes.host_stopped is False
    assert decide(row, Update(config(), "v2", 62)).changes.host_stopped is False
    unmarked = machine(S.STOPPED, "always")
    assert decide(unmarked, Start()).changes.host_stopped is None  # no write to make


# -- a host that went down -------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "standby", "auto_destroy"), list(itertools.product(
    POLICIES, (False, True), (False, True))))
def test_a_run_lost_with_its_host_comes_back_at_once_unless_policy_no_or_a_standby(
        policy: str | None, standby: bool, auto_destroy: bool) -> None:
    row = machine(S.STARTED, policy, standby, restarts=9)
    if auto_destroy:
        row = replace(row, config=row.config.model_copy(update={"auto_destroy": True}))
    decision = decide(row, lost_exit(row))
    assert decision.changes.last_exit is not None
    if returns(policy, standby):
        assert decision.exit_decision is ExitDecision.RESTART
        assert decision.begin == StartMachine(source="flyd", reason=HOST_RESTARTED,
                                              start_seq=row.start_seq + 1, delay=0.0)
        assert decision.changes.restarts == 0
        assert [n.event.status for n in decision.notes if n.event] == ["restarting"]
    elif auto_destroy:  # as policy no says
        assert isinstance(decision.begin, DestroyMachine)
    else:
        assert decision.exit_decision is ExitDecision.STOP
        assert decision.begin == ExitMachine(source="flyd")


def test_an_exit_with_its_record_follows_the_restart_policy_as_before() -> None:
    """Not lost: the program exited (3, or 0) while the worker was down."""
    row = machine(S.STARTED, "on-failure", restarts=2)
    assert row.handle is not None
    clean = ExitObserved(row.handle.instance_id, row.handle.start_seq,
                         ExitStatus(exit_code=0), 1001.0, False)
    assert decide(row, clean).exit_decision is ExitDecision.STOP
    crashed = replace(clean, exit=ExitStatus(exit_code=3))
    decision = decide(row, crashed)
    assert decision.exit_decision is ExitDecision.RESTART
    assert decision.changes.restarts == 3
    assert isinstance(decision.begin, StartMachine)
    assert decision.begin.reason is None


# -- exits while the host's bodega stops ------------------------------------------------------


@pytest.mark.parametrize(("policy", "code", "lost"), list(itertools.product(
    POLICIES, (0, 1), (False, True))))
def test_an_exit_while_draining_rests_marked_if_its_policy_would_have_restarted_it(
        policy: str | None, code: int, lost: bool) -> None:
    row = machine(S.STARTED, policy)
    assert row.handle is not None
    status = ExitStatus(exit_code=code, lost=lost)
    decision = decide(row, ExitObserved(row.handle.instance_id, row.handle.start_seq, status,
                                        1001.0, draining=True))
    assert decision.exit_decision is ExitDecision.STOP
    would_restart = policy == "always" or (policy != "no" and code != 0)
    assert decision.changes.host_stopped == (True if would_restart else None)
