"""The operation runner: persist the step, perform its effect, persist the result.

``begin`` records an operation's first step inside the caller's transaction
(so the checks that allowed it and the record of it commit together);
``drive`` performs effects until a final step. What entering a step does to a
machine's record is not decided here: the ``StepRecorder`` (the shell of the
worker's pure core) decides and writes it. Everything logged here carries the
resource id and the step.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from bodega.model.machine import EventRequest, ExitEvent, MachineEvent
from bodega.runtime.failpoints import Failpoints
from bodega.worker.core.fsm import FSMS, Fsm, Step
from bodega.worker.core.payloads import EndsRun, Payload
from bodega.worker.core.records import TaskHandle
from bodega.worker.store import queries, volume_queries
from bodega.worker.store.database import Operation, Store

log = logging.getLogger("bodega.worker.runner")


def host_local(op: Operation) -> bool:
    """A machine's steps act on this host only (namespaces, cgroups, processes), so their
    commits need no fsync of their own (see ``Store.tx``); a volume's data outlives a
    reboot, so its steps are committed in full."""
    return not op.fsm.endswith("_volume")


@dataclass(frozen=True)
class Attached:
    """The machine's network is attached: its address, and its namespace (None: the host's)."""

    private_ip: str
    netns: str | None


@dataclass(frozen=True)
class Handled:
    """The machine's run is held by ``handle`` now (None: it has none any more)."""

    handle: TaskHandle | None


@dataclass(frozen=True)
class Outcome:
    """What an effect reports: the operation's payload with what it found (None: as it was)
    and what it changed of its machine's record (None: nothing)."""

    payload: Payload | None = None
    update: Attached | Handled | None = None


class EffectFailed(Exception):
    """An effect could not be done; the message becomes the failure event's error."""


class Effects(Protocol):
    async def perform(self, op: Operation, step: Step) -> Outcome: ...

    def inert(self, op: Operation, step: Step) -> Outcome | None:
        """The outcome of ``step`` when its effect does nothing here; None: perform it."""
        ...


class StepRecorder(Protocol):
    """Writes what entering a step, or failing one, does to a machine's record."""

    def entered(self, conn: sqlite3.Connection, op: Operation,
                step: Step) -> Operation | None:
        """Write it; return the operation entering it began (the create's end begins the
        start), if any."""
        ...

    def failed(self, conn: sqlite3.Connection, op: Operation) -> None: ...


def step_event(store: Store, step: Step, payload: Payload) -> MachineEvent | None:
    """The event entering ``step`` records, if it records one."""
    spec = step.event_for(payload)
    if spec is None:
        return None
    type_, status = spec
    request: EventRequest | None = None
    if type_ == "exit" and isinstance(payload, EndsRun) and payload.exit:
        request = EventRequest(exit_event=ExitEvent.model_validate(payload.exit))
    elif payload.error and status == "failed":
        request = EventRequest(error=payload.error)
    if payload.reason is not None:  # the worker's own operation says why it began
        request = (EventRequest(reason=payload.reason) if request is None
                   else request.model_copy(update={"reason": payload.reason}))
    return store.new_event(type_, status, payload.source, request)


def record_begin(
    store: Store, conn: sqlite3.Connection, resource_id: str, payload: Payload,
) -> tuple[Operation, Step]:
    """Record an operation at its first step (the caller then enters that step)."""
    step = FSMS[payload.fsm].first(payload)
    op = store.begin_operation(
        conn, resource_id=resource_id, step=step.name, payload=payload,
        event=step_event(store, step, payload),
    )
    log.info("%s %s: begin at %s", resource_id, payload.fsm, step.name)
    return op, step


class Runner:
    def __init__(
        self,
        store: Store,
        effects: Effects,
        recorder: StepRecorder,
        failpoints: Failpoints = Failpoints(),
        on_step: Callable[[str, str, float], None] = lambda _fsm, _step, _seconds: None,
    ) -> None:
        self.store = store
        self.effects = effects
        self.failpoints = failpoints
        self.on_step = on_step
        self.recorder = recorder

    # -- recording -----------------------------------------------------------
    def _enter(self, conn: sqlite3.Connection, op: Operation, step: Step) -> Operation | None:
        """Write what entering ``step`` does; the operation that began, if any."""
        if not op.fsm.endswith("_volume"):
            return self.recorder.entered(conn, op, step)
        state = step.state_for(op.payload)
        if state is not None:
            volume_queries.update_volume(conn, op.resource_id, self.store.clock(), state=state)
        return None

    def begin(self, conn: sqlite3.Connection, resource_id: str, payload: Payload) -> Operation:
        op, step = record_begin(self.store, conn, resource_id, payload)
        self._enter(conn, op, step)
        return op

    def _advance(self, conn: sqlite3.Connection, fsm: Fsm, op: Operation, step: Step,
                 outcome: Outcome) -> tuple[Operation, Operation | None]:
        """In the open transaction: store what ``step`` reported and enter the next step.
        Returns the operation advanced and the one entering that step began, if any."""
        payload = op.payload if outcome.payload is None else outcome.payload
        following = fsm.after(step.name, payload)
        match outcome.update:
            case Attached(private_ip=private_ip, netns=netns):
                queries.update_machine(conn, op.resource_id, self.store.clock(),
                                       private_ip=private_ip, netns=netns)
            case Handled(handle=handle):
                queries.update_machine(conn, op.resource_id, self.store.clock(), handle=handle)
        op = self.store.advance_operation(
            conn, op, step=following.name, payload=payload,
            status="done" if following.final else "running",
            event=step_event(self.store, following, payload),
        )
        began = self._enter(conn, op, following)
        log.info("%s %s: %s done, now %s", op.resource_id, op.fsm, step.name, following.name)
        return op, began

    # -- folding ---------------------------------------------------------------
    def _inert(self, op: Operation, step: Step) -> Outcome | None:
        """``step``'s outcome if it may be joined to the next step's commit: its effect does
        nothing here and no failpoint is armed at it (a crash test must reach that instant)."""
        if step.final or any((op.fsm, step.name, when) in self.failpoints.points
                             for when in ("before", "after")):
            return None
        return self.effects.inert(op, step)

    def fold(self, conn: sqlite3.Connection, op: Operation) -> tuple[Operation, Operation | None]:
        """In the open transaction, enter each step that follows one whose effect does
        nothing here, as if it had been performed: one commit instead of one per step.

        A crash leaves what it could leave before: nothing (before the commit) or the
        operation at its first step with an effect, or ended (after it); only the instants
        between no-op steps, where nothing happened on the host, are gone. Returns the
        operation as it stands and the one its end began, if it ended and began one."""
        fsm = FSMS[op.fsm]
        began = None
        while op.status == "running":
            step = fsm.step(op.step)
            outcome = self._inert(op, step)
            if outcome is None:
                break
            op, began = self._advance(conn, fsm, op, step, outcome)
        return op, began

    # -- driving -------------------------------------------------------------
    async def drive(self, op: Operation) -> Operation:
        fsm = FSMS[op.fsm]
        while op.status == "running":
            step = fsm.step(op.step)
            if step.final:
                # A final step entered by an older process that died before marking it done.
                with self.store.tx(host_local=host_local(op)) as conn:
                    op = self.store.advance_operation(
                        conn, op, step=step.name, payload=op.payload, status="done"
                    )
                break
            if self._inert(op, step) is not None:
                # Recorded at a no-op step (recovery, or a failpoint armed only elsewhere).
                with self.store.tx(host_local=host_local(op)) as conn:
                    op, _began = self.fold(conn, op)
                continue
            op = await self._perform(fsm, op, step)
        return op

    async def _perform(self, fsm: Fsm, op: Operation, step: Step) -> Operation:
        self.failpoints.hit(op.fsm, step.name, "before")
        started = time.perf_counter()
        try:
            outcome = await self.effects.perform(op, step)
        except (EffectFailed, OSError) as exc:
            return self._fail(fsm, op, step, str(exc) or type(exc).__name__)
        self.on_step(op.fsm, step.name, time.perf_counter() - started)
        self.failpoints.hit(op.fsm, step.name, "after")
        with self.store.tx(host_local=host_local(op)) as conn:
            op, began = self._advance(conn, fsm, op, step, outcome)
            op, _began = self.fold(conn, op)
            if began is not None:  # its first no-op steps in this same commit (a launch's)
                self.fold(conn, began)
        return op

    def abandon(self, op: Operation, error: str) -> Operation:
        """Record ``op`` failed at the step it stands at, as an effect failing there would."""
        fsm = FSMS[op.fsm]
        return self._fail(fsm, op, fsm.step(op.step), error)

    def _fail(self, fsm: Fsm, op: Operation, step: Step, error: str) -> Operation:
        log.warning("%s %s: %s failed: %s", op.resource_id, op.fsm, step.name, error)
        state, event_spec = fsm.on_error
        payload = replace(op.payload, error=error, failed_step=step.name)
        event = None
        if event_spec is not None:
            event = self.store.new_event(
                event_spec[0], event_spec[1], "flyd", EventRequest(error=error, step=step.name)
            )
        with self.store.tx(host_local=host_local(op)) as conn:
            op = self.store.advance_operation(
                conn, op, step=step.name, payload=payload, status="failed", error=error,
                event=event,
            )
            if not op.fsm.endswith("_volume"):
                self.recorder.failed(conn, op)
            elif state is not None:
                volume_queries.update_volume(conn, op.resource_id, self.store.clock(), state=state)
        return op
