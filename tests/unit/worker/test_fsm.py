import pytest

from bodega.model.machine import ExitStatus
from bodega.model.states import RELEASES_COMPUTE, MachineState
from bodega.worker.core.decisions import ExitDecision
from bodega.worker.core.fsm import FSMS, Effect
from bodega.worker.core.payloads import Payload, payload_from_json
from bodega.worker.core.policy import BEGINS, after_exit, restart_delay

# What a move's payload cannot do without (ignored by every other operation's).
MOVE = {"move_id": "m1", "target": "w2", "target_url": "http://w2", "generation": 1,
        "resting": "stopping"}


def typed(fsm_name: str, payload: dict[str, object]) -> Payload:
    """``payload`` as ``fsm_name``'s typed payload; the fields a run needs default to one."""
    return payload_from_json(fsm_name, {"start_seq": 1, "rest_state": "stopped", **MOVE,
                                        **payload})


def path(fsm_name: str, fields: dict[str, object]) -> list[str]:
    fsm = FSMS[fsm_name]
    payload = typed(fsm_name, fields)
    step = fsm.first(payload)
    names = [step.name]
    while not step.final:
        step = fsm.after(step.name, payload)
        names.append(step.name)
    return names


def test_every_operation_ends_in_a_final_step_on_every_path() -> None:
    payloads: list[dict[str, object]] = [{}, {"delay": 1.0}, {"launch": True},
                                         {"launch": False, "rest_state": "stopped"}]
    for name in FSMS:
        for payload in payloads:
            steps = path(name, payload)
            assert FSMS[name].step(steps[-1]).final
            assert len(steps) == len(set(steps)), f"{name} repeats a step"


def test_start_backs_off_only_after_a_crash() -> None:
    assert path("start_machine", {}) == ["starting", "spawn", "started"]
    assert path("start_machine", {"delay": 0.4}) == ["backoff", "starting", "spawn", "started"]


def test_update_launches_or_settles() -> None:
    assert path("update_machine", {"launch": True}) == [
        "updating", "prepare", "starting", "spawn", "started"]
    assert path("update_machine", {"launch": False, "rest_state": "stopped"}) == [
        "updating", "prepare", "settled"]
    settled = FSMS["update_machine"].step("settled")
    assert settled.state_for(typed("update_machine", {"rest_state": "created"})) == "created"
    assert settled.event_for(typed("update_machine", {"rest_state": "stopped"})) == (
        "update", "stopped")


def test_final_steps_have_no_effect_and_others_do() -> None:
    for fsm in FSMS.values():
        for step in fsm.steps:
            assert step.final == (step.effect is Effect.NONE)


def test_every_final_state_is_a_resting_state() -> None:
    for name in ("create_machine", "start_machine", "stop_machine", "restart_machine",
                 "destroy_machine"):
        final = FSMS[name].steps[-1]
        assert final.state in {s.value for s in MachineState}
        assert final.state not in ("starting", "stopping", "updating", "destroying")


def test_operations_begin_only_from_documented_states() -> None:
    assert MachineState.DESTROYED not in BEGINS["start_machine"]
    assert BEGINS["stop_machine"][MachineState.STOPPED] is None  # already stopped: no-op
    assert BEGINS["start_machine"][MachineState.STARTED] is None
    assert set(BEGINS["restart_machine"]) == {MachineState.STARTED}


@pytest.mark.parametrize(
    ("policy", "retries", "restarts", "status", "auto_destroy", "decision"),
    [
        ("always", 0, 99, ExitStatus(exit_code=0), False, ExitDecision.RESTART),
        ("no", 10, 0, ExitStatus(exit_code=1), False, ExitDecision.STOP),
        ("on-failure", 10, 0, ExitStatus(exit_code=1), False, ExitDecision.RESTART),
        ("on-failure", 10, 0, ExitStatus(exit_code=0), False, ExitDecision.STOP),
        ("on-failure", 10, 10, ExitStatus(exit_code=1), False, ExitDecision.STOP),
        ("on-failure", 3, 0, ExitStatus(exit_code=None, signal=9), False, ExitDecision.RESTART),
        ("on-failure", 3, 0, ExitStatus(exit_code=0, oom_killed=True), False,
         ExitDecision.RESTART),
        ("no", 0, 0, ExitStatus(exit_code=0), True, ExitDecision.DESTROY),
        ("on-failure", 3, 0, ExitStatus(exit_code=0), True, ExitDecision.DESTROY),
    ],
)
def test_after_exit(policy: str, retries: int, restarts: int, status: ExitStatus,
                    auto_destroy: bool, decision: ExitDecision) -> None:
    assert after_exit(policy, retries, restarts, status, auto_destroy) is decision


def test_restart_delay_doubles_then_caps() -> None:
    delays = [restart_delay(n) for n in range(10)]
    assert delays[:3] == [0.1, 0.2, 0.4]
    assert max(delays) == 10.0
    assert delays == sorted(delays)


def test_resting_states_that_release_compute() -> None:
    assert MachineState.STOPPED in RELEASES_COMPUTE
    assert MachineState.CREATED not in RELEASES_COMPUTE
