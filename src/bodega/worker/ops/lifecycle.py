"""The thin shell around the worker's pure core: lock, transaction, apply, drive.

``Lifecycle.run`` is the one way a machine's record changes: it takes the
machine's lock, opens a transaction, asks the caller's body for a decision
(the body reads the record and calls ``core.decide``), applies it with the
``Recorder``, and, if it began an operation, drives that operation (and any
it begins in turn) in the background while the lock stays held. Calls return
as soon as the work is durably recorded, as the Machines API does.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bodega.model.errors import Conflict, StorageFull
from bodega.worker.core.decisions import (
    Decision,
    OperationEnded,
    OperationFailed,
    StepEntered,
    Then,
)
from bodega.worker.core.fsm import Step
from bodega.worker.core.rules import decide
from bodega.worker.ops.locks import BUSY_WAIT, MachineLocks
from bodega.worker.ops.runner import Runner, record_begin
from bodega.worker.ops.supervision import Supervision
from bodega.worker.store import queries, volume_queries
from bodega.worker.store.database import Operation, Store
from bodega.worker.store.group_commit import GroupCommit
from bodega.worker.store.ledger import CapacityRejected, Ledger

log = logging.getLogger("bodega.worker.lifecycle")

Body = Callable[[sqlite3.Connection], Decision]


@dataclass(frozen=True)
class Redrive:
    """How an operation whose drive failed unexpectedly is tried again: ``tries`` drives
    in all, the pause before the n-th retry ``first * 2**(n-1)`` seconds, at most ``most``
    (also between attempts to record it failed, while its store refuses that too)."""

    tries: int = 4
    first: float = 0.5
    most: float = 10.0

    def delay(self, failures: int) -> float:
        return min(self.first * 2.0 ** (failures - 1), self.most)


@dataclass(frozen=True)
class Applied:
    """What a committed decision leaves: an operation to drive, and the operation that
    ended in the same commit (its steps all folded), whose end is followed once it commits."""

    drive: Operation | None = None
    ended: str | None = None


class Recorder:
    """Applies the core's decisions inside the caller's transaction."""

    def __init__(self, store: Store, ledger: Ledger) -> None:
        self.store = store
        self.ledger = ledger

    def apply(self, conn: sqlite3.Connection, machine_id: str,
              decision: Decision) -> Operation | None:
        """Write the decision; return the operation it began, if any."""
        if decision.room is not None:
            try:
                self.ledger.check_room(conn, decision.room, exclude_machine=machine_id)
            except CapacityRejected as exc:
                if not decision.room_is_conflict:
                    raise
                raise Conflict(f"aborted: {exc.message}", status=exc.status,
                               details=exc.details) from None
        now = self.store.clock()
        for note in decision.notes:
            spec = note.event
            event = None if spec is None else self.store.new_event(
                spec.type, spec.status, spec.source, spec.request)
            self.store.append(conn, op_id=note.fsm, resource_id=machine_id, fsm=note.fsm,
                              step=note.step, payload=dict(note.payload), event=event)
        columns = decision.changes.columns()
        if columns:
            queries.update_machine(conn, machine_id, now, **columns)
        changes = decision.changes
        if decision.new_version and changes.config is not None and changes.instance_id:
            queries.insert_version(conn, machine_id, changes.instance_id,
                                  changes.config.model_dump_json(exclude_none=True), now)
            queries.replace_versions(conn, machine_id, keep=changes.instance_id)
        if decision.release:
            row = queries.get_machine(conn, machine_id)
            if row is not None and row.volume_id:
                volume_queries.update_volume(conn, row.volume_id, now, attached_machine_id=None)
            queries.delete_lease(conn, machine_id)
        if decision.forget is not None:  # moved: it lives on another worker now
            queries.forget_machine(conn, machine_id, decision.forget.worker,
                                   decision.forget.generation, now)
        if decision.begin is None:
            return None
        op, step = record_begin(self.store, conn, machine_id, decision.begin)
        self.entered(conn, op, step)
        return op

    # -- the runner's StepRecorder -----------------------------------------------------------
    def entered(self, conn: sqlite3.Connection, op: Operation, step: Step) -> Operation | None:
        row = queries.get_machine(conn, op.resource_id)
        if row is None:
            return None
        return self.apply(conn, row.id, decide(row, StepEntered(step.name, op.payload)))

    def failed(self, conn: sqlite3.Connection, op: Operation) -> None:
        row = queries.get_machine(conn, op.resource_id)
        if row is not None:
            self.apply(conn, row.id, decide(row, OperationFailed(op.fsm, op.payload)))


class Lifecycle:
    def __init__(self, store: Store, recorder: Recorder, runner: Runner,
                 supervision: Supervision) -> None:
        self.store = store
        self.recorder = recorder
        self.runner = runner
        self.supervision = supervision
        self.locks = MachineLocks()
        # Set whenever an address is taken or given back, or a machine comes to rest: the
        # worker then wires spare namespaces and parks launchers in idle ones.
        self.spares_changed = asyncio.Event()
        self.background: set[asyncio.Task[Any]] = set()
        # Creates commit in groups: one transaction and one fsync for those that come together.
        self.group = GroupCommit(store)
        self.redrive = Redrive()

    async def run(self, machine_id: str, body: Body, *, lock_timeout: float = BUSY_WAIT,
                  drive: bool = False, drive_before_sync: bool = False) -> Decision:
        """Under the machine's lock and in one transaction, apply what ``body`` decides.

        ``drive``: drive the machine's unfinished operations even if this began none
        (recovery after a restart). ``drive_before_sync``: the operation's effects start
        while its commit is being fsynced, and this returns once it is on disk. Only for
        decisions whose effects live on this host alone (a start: a process), which a crash
        before the fsync loses together with the record (``Store.tx``'s ``host_local``).
        """
        lock = await self.locks.acquire(machine_id, timeout=lock_timeout)
        try:
            with self.store.tx(host_local=drive_before_sync) as conn:
                decision = body(conn)
                applied = self._record(conn, machine_id, decision)
        except BaseException:
            lock.release()
            raise
        self._committed(machine_id, lock, decision, applied, drive=drive)
        if drive_before_sync:
            await self.store.synced()  # answered only once on disk
        return decision

    async def run_grouped(self, machine_id: str, body: Body) -> Decision:
        """``run``, with the transaction shared by the group of calls that come together
        (``GroupCommit``): returns once the group is on disk; fails alone if ``body`` does."""
        lock = await self.locks.acquire(machine_id)

        def record(conn: sqlite3.Connection) -> tuple[Decision, Applied]:
            decision = body(conn)
            return decision, self._record(conn, machine_id, decision)

        def after(done: asyncio.Future[tuple[Decision, Applied]]) -> None:
            # A callback, not code after the await: if the caller is cancelled while its
            # group commits, what the group recorded is still followed and driven.
            if done.cancelled() or done.exception() is not None:
                lock.release()
            else:
                self._committed(machine_id, lock, *done.result())

        committed: asyncio.Future[tuple[Decision, Applied]] = self.group.submit(record)
        committed.add_done_callback(after)
        decision, _applied = await asyncio.shield(committed)
        return decision

    def _record(self, conn: sqlite3.Connection, machine_id: str,
                decision: Decision) -> Applied:
        """Apply the decision; say what is left to drive, and what ended.

        The operation it began goes on, in this same transaction, through its first steps
        whose effects do nothing here (``Runner.fold``): a create on a worker without
        namespaces or directories to make ends in its own commit."""
        op = self.recorder.apply(conn, machine_id, decision)
        if op is None:
            return Applied()
        op, began = self.runner.fold(conn, op)
        if op.status == "running":
            return Applied(drive=op)
        return Applied(drive=began, ended=op.fsm)

    def _committed(self, machine_id: str, lock: asyncio.Lock, decision: Decision,
                   applied: Applied, *, drive: bool = False) -> None:
        self.follow(machine_id, decision)
        if applied.ended is not None:
            self._follow_end(machine_id, applied.ended)
        if applied.drive is None and not drive:
            lock.release()
        else:
            self._drive_pending(machine_id, lock)

    def follow(self, machine_id: str, decision: Decision) -> None:
        """Do what a committed decision says comes next."""
        if Then.SPARES_CHANGED in decision.then:
            self.spares_changed.set()
        if Then.WATCH in decision.then:
            row = queries.get_machine(self.store.db, machine_id)
            if row is not None and row.handle is not None:
                self.supervision.watch(row.id, row.handle)

    def _follow_end(self, machine_id: str, fsm: str) -> None:
        """Do what the committed end of the machine's operation ``fsm`` leads to."""
        row = queries.get_machine(self.store.db, machine_id)
        if row is not None:
            self.follow(machine_id, decide(row, OperationEnded(fsm)))
        else:  # moved away: its address is free
            self.spares_changed.set()

    async def after_drives(self, timeout: float) -> None:
        """Until the operations being driven now have ended, at most ``timeout`` seconds.

        Housekeeping that can wait (wiring spare namespaces, publishing to the registry)
        waits here, so that it does not spend the worker's event loop and the host's cores
        in the milliseconds in which a machine is being started: a start reaches its spawn
        first. Operations begun meanwhile are not waited for, and a long one (a stop's
        timeout, a restart's backoff) holds nothing up for longer than ``timeout``."""
        if self.background:
            await asyncio.wait(set(self.background), timeout=timeout)

    def _drive_pending(self, machine_id: str, lock: asyncio.Lock) -> None:
        """Drive the operations a finished one began (in order), then release the lock.

        An error the runner does not expect (its store refusing a write, a bug in an
        effect) is treated as a crash at that instant: the operation is driven again from
        the step it recorded, as a restarted worker would, after a pause that doubles
        (``Redrive``). A full disk (``StorageFull``: nothing was recorded) is waited out
        so. Anything else that keeps failing has the operation recorded failed, so that
        the machine rests in its failed state, which a start or a destroy leaves, rather
        than in a transient one nothing leaves until the worker restarts."""

        async def drive() -> None:
            failures = 0
            give_up = False
            error = ""
            try:
                # One pass of the loop first: the call that committed this (a create) is
                # woken in it and writes its answer, before the effects hold the loop for
                # the milliseconds they take without waiting on anything.
                await asyncio.sleep(0)
                while (op := self._next_operation(machine_id)) is not None:
                    try:
                        if give_up:
                            op = self.runner.abandon(op, f"the worker could not go on: {error}")
                        else:
                            op = await self.runner.drive(op)
                    except Exception as exc:
                        failures += 1
                        error = str(exc) or type(exc).__name__
                        # A full disk recorded nothing and frees up: that is waited out.
                        give_up = (not isinstance(exc, StorageFull)
                                   and failures >= self.redrive.tries)
                        delay = self.redrive.delay(failures)
                        log.warning("%s %s: driving failed at %s (%s); %s in %.1f s",
                                    machine_id, op.fsm, op.step, error,
                                    "recording it failed" if give_up else "trying again",
                                    delay, exc_info=not isinstance(exc, StorageFull))
                        await asyncio.sleep(delay)
                        continue
                    failures, give_up = 0, False
                    if not op.fsm.endswith("_volume"):
                        self._follow_end(machine_id, op.fsm)
            finally:
                lock.release()

        task = asyncio.create_task(drive())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def _next_operation(self, machine_id: str) -> Operation | None:
        """The oldest unfinished operation on ``machine_id`` (or on the volume of that id)."""
        return next((op for op in self.store.running_operations()
                     if op.resource_id == machine_id), None)
