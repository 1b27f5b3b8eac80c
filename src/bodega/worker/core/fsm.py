"""Every operation a worker performs, declared as a state machine.

A machine operation is a fixed list of steps. Entering a step is recorded in
the log (with the machine state and event it implies) *before* the step's side
effect runs; the effect's result is recorded when the next step is entered.
A worker that dies anywhere resumes at the last recorded step and repeats its
effect, so every effect is idempotent. This module is pure: specs, the order
of steps, what an exit means. ``ops/runner.py`` drives them and
``ops/effects.py`` performs their effects; each carries its own typed payload
(``payloads.py``), whose fields a step may depend on.

    create_machine   attach_network ─▶ prepare ─▶ created·
    start_machine    [backoff] ─▶ starting ─▶ spawn ─▶ started·   (backoff: crash loops)
    stop_machine     stopping ─▶ stopped·
    exit_machine     stopped·                                     (its process exited on its own)
    restart_machine  restarting ─▶ spawn ─▶ started·
    update_machine   updating ─▶ prepare ─▶ [launch] starting ─▶ spawn ─▶ started·
                                          └▶ [no launch] settled·
    suspend_machine  suspending ─▶ suspended·                       (freeze; memory kept)
    resume_machine   resuming ─▶ started·                         (thaw the same run)
    destroy_machine  destroying ─▶ teardown ─▶ destroyed·
    move_machine     moving ─▶ [copying] ─▶ handoff ─▶ teardown ─▶ [dropping] ─▶ moved·
                     ([...]: with a volume; the record then forgotten)
                     live: leaving ─▶ handing ─▶ migrating ─▶ teardown ─▶ moved·
    create_volume    provision ─▶ created·
    delete_volume    removing ─▶ destroyed·

(· marks a final step: it has no effect, and entering it ends the operation.)
A failed effect ends the operation in the machine's ``on_error`` state. What
follows an operation's end is declared as its ``then``; ``rules.py`` holds the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum

from bodega.model.states import MachineState
from bodega.worker.core.payloads import (
    CreateMachine,
    CreateVolume,
    DeleteVolume,
    DestroyMachine,
    ExitMachine,
    MoveMachine,
    Payload,
    RestartMachine,
    ResumeMachine,
    StartMachine,
    StopMachine,
    SuspendMachine,
    UpdateMachine,
)


class Effect(StrEnum):
    NONE = "none"
    BACKOFF = "backoff"  # wait the payload's ``delay`` seconds (restart after a crash)
    ATTACH_NETWORK = "attach_network"  # ensure the machine's address and namespace
    PREPARE = "prepare"  # directories, image, rootfs
    SPAWN = "spawn"  # start the task for the payload's ``start_seq``
    STOP_TASK = "stop_task"  # [thaw,] signal, SIGKILL after the timeout, wait for the exit
    FREEZE = "freeze"  # freeze the run's processes, keeping their memory
    THAW = "thaw"  # let a frozen run go on
    TEARDOWN = "teardown"  # remove the task's traces and the network
    HANDOFF = "handoff"  # hand the record to the move's target until it takes or refuses it
    # (and a live move's VM state: ``ops/moves.py`` does each step's part)
    SHIP_VOLUME = "ship_volume"  # copy the volume's data to the move's target, digest checked
    DROP_VOLUME = "drop_volume"  # remove a volume's data that moved away
    PROVISION_VOLUME = "provision_volume"
    REMOVE_VOLUME = "remove_volume"


class After(StrEnum):
    """What follows an operation's end (``rules.py`` says how)."""

    NOTHING = "nothing"
    LAUNCH = "launch"  # in the commit that ends it: begin the start asked for at create
    WATCH = "watch"  # once it ends: supervise the process if the machine is started
    REST = "rest"  # once it ends: the machine is at rest, its spare namespace is reusable
    RELEASE = "release"  # in the commit that ends it: give back compute, volume and lease
    FORGET = "forget"  # in the commit that ends it: the record goes (it lives elsewhere now)


@dataclass(frozen=True)
class Step:
    name: str
    effect: Effect = Effect.NONE
    state: str | None = None  # machine state while in this step; "$field" reads the payload
    event: tuple[str, str] | None = None  # (type, status) recorded on entering the step
    when: str | None = None  # run only when the payload's field is truthy; "!field": falsy

    @property
    def final(self) -> bool:
        return self.effect is Effect.NONE

    def fields(self) -> set[str]:
        """The payload fields this step depends on."""
        named = {self.when.lstrip("!")} if self.when else set()
        for value in (self.state, self.event[1] if self.event else None):
            if value is not None and value.startswith("$"):
                named.add(value[1:])
        return named

    def applies(self, payload: Payload) -> bool:
        if self.when is None:
            return True
        if self.when.startswith("!"):
            return not getattr(payload, self.when[1:])
        return bool(getattr(payload, self.when))

    def state_for(self, payload: Payload) -> str | None:
        return _resolve(self.state, payload)

    def event_for(self, payload: Payload) -> tuple[str, str] | None:
        if self.event is None:
            return None
        return self.event[0], str(_resolve(self.event[1], payload))


def _resolve(value: str | None, payload: Payload) -> str | None:
    if value is not None and value.startswith("$"):
        return str(getattr(payload, value[1:]))
    return value


@dataclass(frozen=True)
class Fsm:
    payload: type[Payload]  # what an operation of this machine carries; names the machine
    steps: tuple[Step, ...]
    on_error: tuple[str | None, tuple[str, str] | None]  # (machine state, event)
    then: After = After.NOTHING

    def __post_init__(self) -> None:
        # A step may only depend on fields its payload has: a misspelling fails at import.
        known = {f.name for f in fields(self.payload)}
        for step in self.steps:
            if not step.fields() <= known:
                raise ValueError(f"{self.name}.{step.name} reads payload fields "
                                 f"{sorted(step.fields() - known)} it does not have")

    @property
    def name(self) -> str:
        return self.payload.fsm

    def step(self, name: str) -> Step:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(f"{self.name} has no step {name!r}")

    def first(self, payload: Payload) -> Step:
        return next(step for step in self.steps if step.applies(payload))

    def after(self, name: str, payload: Payload) -> Step:
        """The step that follows ``name`` for this payload; every path ends in a final step."""
        index = [step.name for step in self.steps].index(name)
        for step in self.steps[index + 1 :]:
            if step.applies(payload):
                return step
        raise ValueError(f"{self.name}: no step after {name!r} for this payload")


S = MachineState

FSMS: dict[str, Fsm] = {
    fsm.name: fsm
    for fsm in (
        Fsm(
            CreateMachine,
            (
                Step("attach_network", Effect.ATTACH_NETWORK, S.CREATED),
                Step("prepare", Effect.PREPARE),
                Step("created", state=S.CREATED, event=("launch", "created")),
            ),
            on_error=(S.FAILED, ("launch", "failed")),
            then=After.LAUNCH,
        ),
        Fsm(
            StartMachine,
            (
                Step("backoff", Effect.BACKOFF, S.STARTING, when="delay"),
                Step("starting", Effect.ATTACH_NETWORK, S.STARTING, ("start", "starting")),
                Step("spawn", Effect.SPAWN),
                Step("started", state=S.STARTED, event=("start", "started")),
            ),
            on_error=(S.FAILED, ("start", "failed")),
            then=After.WATCH,
        ),
        Fsm(
            StopMachine,
            (
                Step("stopping", Effect.STOP_TASK, S.STOPPING, ("stop", "stopping")),
                Step("stopped", state=S.STOPPED, event=("exit", "stopped")),
            ),
            on_error=(S.FAILED, ("stop", "failed")),
            then=After.REST,
        ),
        Fsm(
            ExitMachine,
            (Step("stopped", state=S.STOPPED),),  # the exit event is logged with the decision
            on_error=(None, None),
            then=After.REST,
        ),
        Fsm(
            RestartMachine,
            (
                Step("restarting", Effect.STOP_TASK, S.RESTARTING, ("restart", "restarting")),
                Step("spawn", Effect.SPAWN, S.STARTING),
                Step("started", state=S.STARTED, event=("start", "started")),
            ),
            on_error=(S.FAILED, ("restart", "failed")),
            then=After.WATCH,
        ),
        Fsm(
            UpdateMachine,
            (
                Step("updating", Effect.STOP_TASK, S.UPDATING, ("update", "updating")),
                Step("prepare", Effect.PREPARE),
                Step("starting", Effect.ATTACH_NETWORK, S.STARTING, ("start", "starting"),
                     when="launch"),
                Step("spawn", Effect.SPAWN, when="launch"),
                Step("started", state=S.STARTED, event=("start", "started"), when="launch"),
                Step("settled", state="$rest_state", event=("update", "$rest_state"),
                     when="!launch"),
            ),
            on_error=(S.FAILED, ("update", "failed")),
            then=After.WATCH,
        ),
        Fsm(
            SuspendMachine,
            (
                Step("suspending", Effect.FREEZE, S.SUSPENDING, ("suspend", "suspending")),
                Step("suspended", state=S.SUSPENDED, event=("suspend", "suspended")),
            ),
            # The effect thaws what it froze before it reports a failure: still running.
            on_error=(S.STARTED, ("suspend", "failed")),
        ),
        Fsm(
            ResumeMachine,
            (
                Step("resuming", Effect.THAW, S.STARTING, ("start", "starting")),
                Step("started", state=S.STARTED, event=("start", "started")),
            ),
            # A thaw that failed left the process frozen: the machine is still suspended.
            on_error=(S.SUSPENDED, ("start", "failed")),
            then=After.WATCH,
        ),
        Fsm(
            DestroyMachine,
            (
                Step("destroying", Effect.STOP_TASK, S.DESTROYING, ("destroy", "destroying")),
                Step("teardown", Effect.TEARDOWN),
                Step("destroyed", state=S.DESTROYED, event=("destroy", "destroyed")),
            ),
            on_error=(None, ("destroy", "failed")),
            then=After.RELEASE,
        ),
        Fsm(
            MoveMachine,
            (
                Step("moving", Effect.STOP_TASK, "$resting", ("move", "moving"), when="!live"),
                # A live move's VM runs on until its state has gone over (``migrating``).
                Step("leaving", Effect.HANDOFF, "$resting", ("move", "moving"), when="live"),
                Step("copying", Effect.SHIP_VOLUME, S.STOPPED, when="volume_id"),
                Step("handoff", Effect.HANDOFF, S.STOPPED, when="!live"),
                Step("handing", Effect.HANDOFF, S.STARTED, when="live"),  # the VM runs here
                Step("migrating", Effect.HANDOFF, S.STARTED, when="live"),
                Step("teardown", Effect.TEARDOWN),
                Step("dropping", Effect.DROP_VOLUME, when="volume_id"),
                Step("moved", event=("move", "moved")),
            ),
            # Refused by the target, or its stop failed: it rests here (``core/moves.py``
            # starts it again if it was running); once handed over, it is forgotten anyway.
            on_error=(S.STOPPED, ("move", "failed")),
            then=After.FORGET,
        ),
        Fsm(
            CreateVolume,
            (Step("provision", Effect.PROVISION_VOLUME, "creating"),
             Step("created", state="created")),
            on_error=("failed", None),
        ),
        Fsm(
            DeleteVolume,
            (Step("removing", Effect.REMOVE_VOLUME, "destroying"),
             Step("destroyed", state="destroyed")),
            on_error=(None, None),
        ),
    )
}
