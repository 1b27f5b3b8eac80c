"""Every rule about a machine, as one pure function: ``decide(record, stimulus)``.

No SQLite, no driver, no clock, no tasks: the shell (``ops/lifecycle.py``) reads the
machine's record under its lock, hands it in with what happened, and applies
the ``Decision`` it gets back in one transaction: the record's changes, the
room to check first, the operation to begin, the note to log, and what to do
once that commits. ``fsm.py`` declares each operation's steps; this module
says when an operation may begin, what entering a step writes, what follows
the end of an operation, and what a process's own exit leads to.

    stimulus            from (state)                          decision
    Create              (none)                                 begin create_machine
    StepEntered         any step of any operation              the step's state (rest frees compute)
      create ends       created                                then start, unless skip_launch
      destroy ends      destroyed                              frees compute, volume and lease
    OperationFailed     the operation's state                  its on_error state
    OperationEnded      start, restart, update                 watch the process if started
                        stop, destroy, exit                    spare addresses changed
    Start               created stopped failed                 check room unless held; begin start
                        suspended                              begin resume (core/suspend.py)
                        started                                nothing (already there)
    Stop                started created failed suspended       begin stop
                        stopped                                nothing (already there)
    HostStop            as Stop (the host's bodega stops)      begin stop; a started machine is
                                                               marked host_stopped
    Restart             started                                begin restart
    Update              created started stopped failed         check room if it will hold compute;
                        suspended                              new version; begin update
    Destroy             created stopped failed suspended       begin destroy (started: only forced)
                        destroying
    Signal              started                                deliver it
    Suspend             started                                begin suspend (core/suspend.py)
    Move                started created stopped failed         begin move_machine (core/moves.py)
      move ends         moved                                  the record is forgotten
    Cordon, SetMetadata any                                    cordoned, or the config's metadata
                                                               (core/annotations.py)
    ExitObserved        started, same run                      restart policy: begin start after
                                                               a backoff, destroy, or exit_machine
                          while draining                       rest (marked host_stopped if the
                                                               policy would have restarted it)
                          lost with its host                   comes_back: begin start at once,
                                                               else as policy no
                        anything else                          nothing (an operation stopped it)
    Recovered           started or suspended, with a process   watch it
                        stopped and host_stopped               comes_back: begin start; unmarked
                        elsewhere host_stopped                 unmarked
    CheckResult         started, same run, status changed      the check's new state, an event
                        anything else                          nothing (a former run's probe)

Any other (stimulus, state) pair is refused with ``PreconditionFailed``.
"""

from __future__ import annotations

from dataclasses import replace

from bodega.model.capacity import Ask
from bodega.model.errors import NotFound, PreconditionFailed
from bodega.model.machine import EventRequest
from bodega.model.states import RELEASES_COMPUTE
from bodega.model.states import MachineState as S
from bodega.worker.core.annotations import NOTHING, check_result, cordon, set_metadata
from bodega.worker.core.decisions import (
    Changes,
    CheckResult,
    Cordon,
    Create,
    Decision,
    Destroy,
    EventSpec,
    ExitDecision,
    ExitObserved,
    HostStop,
    Move,
    Note,
    OperationEnded,
    OperationFailed,
    Recovered,
    Restart,
    SetMetadata,
    Signal,
    Sizing,
    Start,
    StepEntered,
    Stimulus,
    Stop,
    Suspend,
    Then,
    Update,
)
from bodega.worker.core.fsm import FSMS, After
from bodega.worker.core.moves import AfterFailure, after_failure, move, moved
from bodega.worker.core.payloads import (
    CreateMachine,
    DestroyMachine,
    ExitMachine,
    MoveMachine,
    RestartMachine,
    StartMachine,
    StopMachine,
    UpdateMachine,
)
from bodega.worker.core.policy import (
    HOST_RESTARTED,
    HOST_STOPPING,
    RESTART_WINDOW,
    after_exit,
    comes_back,
    may_begin,
    restart_delay,
)
from bodega.worker.core.records import MachineRow
from bodega.worker.core.suspend import resume, suspend, thawing


def decide(record: MachineRow | None, stimulus: Stimulus) -> Decision:
    """What ``stimulus`` does to the machine ``record`` describes (None: not recorded yet)."""
    if isinstance(stimulus, Create):  # the shell inserts the record with these changes
        return Decision(changes=Changes(state=S.CREATED, holds_compute=True),
                        begin=CreateMachine(launch=stimulus.launch),
                        then=frozenset({Then.SPARES_CHANGED}))  # it took an address
    if record is None:
        raise NotFound("machine not found")
    match stimulus:
        case StepEntered():
            return _step_entered(record, stimulus)
        case OperationFailed(payload=MoveMachine() as payload):
            return _move_failed(record, payload)
        case OperationFailed():
            state = FSMS[stimulus.fsm].on_error[0]
            return Decision(changes=_state_changes(state)) if state is not None else NOTHING
        case OperationEnded():
            return _operation_ended(record, stimulus)
        case Start():
            return _start(record)
        case Stop() | Restart():
            return _stop_or_restart(record, stimulus)
        case HostStop():
            return _host_stop(record, stimulus)
        case Update():
            return _update(record, stimulus)
        case Destroy():
            return _destroy(record, stimulus)
        case Signal():
            if record.state != S.STARTED or record.handle is None:
                raise PreconditionFailed(
                    f"failed_precondition: machine {record.id} is {record.state}, not started")
            return NOTHING
        case Suspend():
            return suspend(record, stimulus)
        case Move():
            return move(record, stimulus)
        case Cordon():
            return cordon(stimulus)
        case SetMetadata():
            return set_metadata(record, stimulus)
        case ExitObserved():
            return _exit_observed(record, stimulus)
        case Recovered():
            return _recovered(record)
        case CheckResult():
            return check_result(record, stimulus)
    raise TypeError(f"unknown stimulus {stimulus!r}")


def _state_changes(state: str | None) -> Changes:
    if state is None:
        return Changes()
    # Coming to rest without a process gives the machine's cpu and memory back.
    return Changes(state=state, holds_compute=False if state in RELEASES_COMPUTE else None)


def _step_entered(record: MachineRow, stimulus: StepEntered) -> Decision:
    fsm = FSMS[stimulus.fsm]
    step = fsm.step(stimulus.step)
    changes = _state_changes(step.state_for(stimulus.payload))
    if not step.final:
        return Decision(changes=changes)
    launch = isinstance(stimulus.payload, CreateMachine) and stimulus.payload.launch
    if fsm.then is After.LAUNCH and launch:
        # The start begins in the same commit that ends the create, so a crash in
        # between can never leave a machine created that was asked to launch.
        return _begin_start(record, "flyd", delay=0.0, changes=changes, attached=True)
    if fsm.then is After.FORGET and isinstance(stimulus.payload, MoveMachine):
        return moved(stimulus.payload)
    if fsm.then is After.RELEASE:
        return Decision(changes=Changes(state=changes.state, holds_compute=False,
                                        clear_handle=True), release=True)
    return Decision(changes=changes)


def _move_failed(record: MachineRow, payload: MoveMachine) -> Decision:
    """A move that failed: the machine rests here, runs here again, or is gone all the same."""
    match after_failure(payload):
        case AfterFailure.FORGET:
            return moved(payload)
        case AfterFailure.RESTART:
            return _begin_start(record, "flyd", delay=0.0, changes=_state_changes(S.STOPPED),
                                reason=f"move to {payload.target} failed")
        case AfterFailure.RUNS:  # its run was never stopped: watched again
            return Decision(changes=Changes(state=S.STARTED), then=frozenset({Then.WATCH}))
    return Decision(changes=_state_changes(S.STOPPED))


def _operation_ended(record: MachineRow, stimulus: OperationEnded) -> Decision:
    after = FSMS[stimulus.fsm].then
    if after is After.WATCH:
        started = record.state == S.STARTED and record.handle is not None
        return Decision(then=frozenset({Then.WATCH})) if started else NOTHING
    if after in (After.REST, After.RELEASE):
        return Decision(then=frozenset({Then.SPARES_CHANGED}))
    return NOTHING


def _begin_start(record: MachineRow, source: str, delay: float,
                 changes: Changes = Changes(), reason: str | None = None,
                 attached: bool = False) -> Decision:
    start_seq = record.start_seq + 1
    # Any start settles what the host's stop left to do: the machine runs again.
    unmark = Changes(host_stopped=False) if record.host_stopped else Changes()
    return Decision(
        room=None if record.holds_compute else Ask.for_config(record.config),
        changes=changes.merge(unmark).merge(Changes(holds_compute=True, start_seq=start_seq)),
        begin=StartMachine(source=source, reason=reason, start_seq=start_seq, delay=delay,
                           attached=attached),
    )


def _host_stop(record: MachineRow, stimulus: HostStop) -> Decision:
    """A stop like a call's, by the worker, that marks a started machine to come back."""
    if not may_begin("stop_machine", record):
        return Decision(already=True)
    # Marked in the commit that begins the stop: a crash in its middle finishes the stop
    # at the next start, and the mark is there for the return that follows.
    mark = Changes(host_stopped=True) if record.state == S.STARTED else Changes()
    return Decision(changes=mark, begin=StopMachine(
        source="flyd", reason=HOST_STOPPING, thaw=thawing(record), timeout=stimulus.timeout))


def _recovered(record: MachineRow) -> Decision:
    # A suspended machine's frozen process is re-adopted like a running one.
    if record.state in (S.STARTED, S.SUSPENDED) and record.handle is not None:
        return Decision(then=frozenset({Then.WATCH}))
    if not record.host_stopped:
        return NOTHING
    if record.state == S.STOPPED and comes_back(record):
        return _begin_start(record, "flyd", delay=0.0, changes=Changes(restarts=0),
                            reason=HOST_RESTARTED)
    return Decision(changes=Changes(host_stopped=False))  # it stays where it rests


def _start(record: MachineRow) -> Decision:
    if record.state == S.SUSPENDED:
        return resume(record)
    if not may_begin("start_machine", record):
        return Decision(already=True)
    fresh = Changes(restarts=0) if record.state in (S.STOPPED, S.FAILED) else Changes()
    return _begin_start(record, "user", delay=0.0, changes=fresh)


def _stop_or_restart(record: MachineRow, stimulus: Stop | Restart) -> Decision:
    fsm = "stop_machine" if isinstance(stimulus, Stop) else "restart_machine"
    if not may_begin(fsm, record):
        return Decision(already=True)
    if isinstance(stimulus, Stop):
        return Decision(begin=StopMachine(thaw=thawing(record), signal=stimulus.signal,
                                          timeout=stimulus.timeout))
    start_seq = record.start_seq + 1
    return Decision(changes=Changes(start_seq=start_seq),
                    begin=RestartMachine(thaw=thawing(record), signal=stimulus.signal,
                                         timeout=stimulus.timeout, start_seq=start_seq))


def _update(record: MachineRow, stimulus: Update) -> Decision:
    may_begin("update_machine", record)
    launch = record.state == S.STARTED or not stimulus.skip_launch
    holds = record.holds_compute or launch
    ask = Ask.for_config(stimulus.config)
    start_seq = record.start_seq + 1 if launch else record.start_seq
    rest_state = S.CREATED if record.state == S.CREATED else S.STOPPED
    return Decision(
        room=ask if holds else None,
        room_is_conflict=True,
        changes=Changes(
            config=stimulus.config, instance_id=stimulus.instance_id,
            sizing=Sizing(stimulus.millicpus, ask.memory_mb, ask.gpus, ask.gpu_kind),
            holds_compute=holds, start_seq=start_seq, restarts=0,
            host_stopped=False if record.host_stopped else None,
        ),
        new_version=True,
        begin=UpdateMachine(launch=launch, rest_state=str(rest_state), start_seq=start_seq,
                            thaw=thawing(record)),
    )


def _destroy(record: MachineRow, stimulus: Destroy) -> Decision:
    if record.state == S.DESTROYED:
        raise NotFound(f"machine not found: {record.id} was destroyed")
    may_begin("destroy_machine", record)
    if record.state == S.STARTED and not stimulus.force:
        raise PreconditionFailed(
            f"failed_precondition: unable to destroy machine {record.id}, not "
            "currently stopped, suspended or failed; stop it first or use force=true"
        )
    if stimulus.force:
        return Decision(begin=DestroyMachine(thaw=thawing(record), signal="SIGKILL",
                                             timeout=0.0))
    return Decision(begin=DestroyMachine(thaw=thawing(record)))


def _exit_observed(record: MachineRow, stimulus: ExitObserved) -> Decision:
    handle = record.handle
    if (record.state != S.STARTED or handle is None
            or handle.start_seq != stimulus.start_seq
            or handle.instance_id != stimulus.instance_id):
        return NOTHING  # an operation stopped it on purpose and recorded the exit itself
    policy, max_retries = record.config.restart_policy()
    ran_for = stimulus.now - handle.started_at
    restarts = 0 if ran_for > RESTART_WINDOW else record.restarts
    auto_destroy = bool(record.config.auto_destroy)
    noted = Changes(last_exit=stimulus.exit)
    if stimulus.draining:
        # A restart now would outlive the worker that is stopping it: it rests, marked to
        # come back with the host if its policy would have restarted it.
        if after_exit(policy, max_retries, restarts, stimulus.exit,
                      auto_destroy) is ExitDecision.RESTART:
            noted = noted.merge(Changes(host_stopped=True))
        policy = "no"
    elif stimulus.exit.lost:
        if comes_back(record):
            return _lost_with_host(record, stimulus)
        policy = "no"  # a machine that does not come back rests (or is destroyed) here
    verdict = after_exit(policy, max_retries, restarts, stimulus.exit, auto_destroy)
    status = {ExitDecision.RESTART: "restarting", ExitDecision.STOP: "stopped",
              ExitDecision.DESTROY: "destroying"}[verdict]
    note = Note("supervise", "exit", {"decision": str(verdict)},
                EventSpec("exit", status, "flyd",
                          EventRequest(exit_event=stimulus.exit.exit_event())))
    if verdict is ExitDecision.RESTART:
        start = _begin_start(record, "flyd", delay=restart_delay(restarts),
                             changes=noted.merge(Changes(restarts=restarts + 1)))
        return replace(start, notes=(note,), exit_decision=verdict)
    begin: DestroyMachine | ExitMachine
    if verdict is ExitDecision.DESTROY:
        begin = DestroyMachine(source="flyd", signal="SIGKILL", timeout=0.0)
    else:  # it comes to rest through its own operation, like every other state change
        begin = ExitMachine(source="flyd")
    return Decision(changes=noted, begin=begin, notes=(note,), exit_decision=verdict)


def _lost_with_host(record: MachineRow, stimulus: ExitObserved) -> Decision:
    """The worker came back to find the run over, killed with its host: the machine comes
    back as one its host stopped would, at once and not counted as a crash of its own."""
    verdict = ExitDecision.RESTART
    note = Note("supervise", "exit", {"decision": str(verdict), "lost": True},
                EventSpec("exit", "restarting", "flyd",
                          EventRequest(exit_event=stimulus.exit.exit_event())))
    start = _begin_start(record, "flyd", delay=0.0, reason=HOST_RESTARTED,
                         changes=Changes(last_exit=stimulus.exit, restarts=0))
    return replace(start, notes=(note,), exit_decision=verdict)
