"""Machine lifecycle entry points: each reads the record, asks the core, hands off to the shell.

Every entry point is one ``Lifecycle.run``: under the machine's lock and in one
transaction it checks the lease, asks ``core.decide`` what the call does to the
machine (refusal, nothing, or an operation to begin) and records it; the
operation is then driven to its end in the background while the lock is held.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal as signals
import sqlite3
from collections.abc import Callable

from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, BodegaError, NotFound
from bodega.model.ids import MACHINE_ID_RE, new_ulid
from bodega.model.machine import ExitStatus
from bodega.model.machine_config import MachineConfig
from bodega.model.states import MachineState
from bodega.wire.internal.worker_calls import Started
from bodega.worker.core.decisions import (
    CheckResult,
    Decision,
    Destroy,
    ExitObserved,
    HostStop,
    Recovered,
    Restart,
    Start,
    Stop,
    Suspend,
    Update,
)
from bodega.worker.core.policy import may_begin
from bodega.worker.core.records import MachineRow
from bodega.worker.core.rules import decide
from bodega.worker.drivers.base import TaskHandle, needs_command
from bodega.worker.ops.claims import check_update
from bodega.worker.ops.creation import MachineCreation
from bodega.worker.ops.effects import MachineEffects, signal_number
from bodega.worker.ops.lifecycle import Lifecycle, Recorder
from bodega.worker.ops.locks import BUSY_WAIT, MachineLocks
from bodega.worker.ops.runner import Runner
from bodega.worker.ops.supervision import Supervision
from bodega.worker.store import leases, queries
from bodega.worker.store.database import Operation, Store
from bodega.worker.store.ledger import CapacityRejected, Ledger

__all__ = ["MachineService"]

log = logging.getLogger("bodega.worker.machines")


class MachineService:
    def __init__(
        self,
        store: Store,
        ledger: Ledger,
        runner: Runner,
        effects: MachineEffects,
        ip_range: tuple[int, int],
        recorder: Recorder,
        worker: str | None = None,
    ) -> None:
        self.worker = worker  # its name marks the ids it makes up (model/ids.py)
        self.store = store
        self.ledger = ledger
        self.runner = runner
        self.effects = effects
        self.driver = effects.driver
        self.ip_range = ip_range
        self.supervision = Supervision(self.driver, self.on_exit)
        self.lifecycle = Lifecycle(store, recorder, runner, self.supervision)
        self.creation = MachineCreation(store, ledger, self.lifecycle, self.driver,
                                        effects.network, ip_range, effects.config.region,
                                        worker)
        # Told what the restart policy decided for each exit (the daemon counts them).
        self.on_exit_decision: Callable[[str], None] = lambda _decision: None

    @property
    def locks(self) -> MachineLocks:
        return self.lifecycle.locks

    @property
    def spares_changed(self) -> asyncio.Event:
        return self.lifecycle.spares_changed

    def get(self, machine_id: str) -> MachineRow:
        if not MACHINE_ID_RE.match(machine_id):
            raise NotFound(f"machine not found: {machine_id!r} is not a machine id")
        row = queries.get_machine(self.store.db, machine_id)
        if row is None:
            raise NotFound(f"machine not found: {machine_id}")
        return row

    def _leased(self, conn: sqlite3.Connection, machine_id: str, nonce: str | None,
                override: bool = False) -> MachineRow:
        """The machine's record, once its lease (unless overridden) lets this caller act."""
        row = self.get(machine_id)
        if not override:
            leases.check(conn, machine_id, nonce, self.store.clock())
        return row

    async def settle(self) -> None:
        """Wait until no operation or exit handling is under way (tests and shutdown)."""
        while True:
            for _ in range(5):
                await asyncio.sleep(0)  # let watchers woken by an exit reach on_exit
            pending = self.lifecycle.background | self.supervision.exiting
            if not pending:
                return
            await asyncio.gather(*pending, return_exceptions=True)

    # -- start, stop, restart ------------------------------------------------------------
    async def start(self, machine_id: str, nonce: str | None = None) -> Started:
        previous: list[str] = []
        with contextlib.suppress(NotFound):  # the call itself says so, under the lock
            row = self.get(machine_id)
            if row.state != MachineState.SUSPENDED and may_begin("start_machine", row):
                # A launch, not a resume or nothing at all: the driver readies the host.
                self.creation.start_coming(machine_id, row.config)

        def body(conn: sqlite3.Connection) -> Decision:
            row = self._leased(conn, machine_id, nonce)
            previous.append(row.state)
            asks.append(Ask.for_config(row.config))
            return decide(row, Start())

        asks: list[Ask] = []
        # The spawn does not wait for the start's fsync; the answer does.
        try:
            await self.lifecycle.run(machine_id, body, drive_before_sync=True)
        except CapacityRejected as refused:
            # Room held by what gives way (idle warm slots) is made for it, then once more.
            if not asks or not await self.ledger.made_room(refused, asks[-1], machine_id):
                raise
            await self.lifecycle.run(machine_id, body, drive_before_sync=True)
        return Started(previous_state=previous[0], migrated=False, new_host="")

    async def stop(
        self, machine_id: str, nonce: str | None = None, signal: str | int | None = None,
        timeout: float | None = None, lease_override: bool = False,
    ) -> None:
        """``lease_override``: the worker's own stop on exit, which no lease may refuse."""
        _check_signal(signal)
        await self.lifecycle.run(machine_id, lambda conn: decide(
            self._leased(conn, machine_id, nonce, lease_override), Stop(signal, timeout)))

    async def host_stop(self, machine_id: str, timeout: float) -> None:
        """The worker's own stop as its host's bodega stops: no lease refuses it, and a
        machine it stops while started comes back when the worker starts again."""
        await self.lifecycle.run(machine_id, lambda _conn: decide(
            self.get(machine_id), HostStop(timeout)))

    async def restart(
        self, machine_id: str, nonce: str | None = None, signal: str | int | None = None,
        timeout: float | None = None,
    ) -> None:
        _check_signal(signal)
        await self.lifecycle.run(machine_id, lambda conn: decide(
            self._leased(conn, machine_id, nonce), Restart(signal, timeout)))

    async def suspend(self, machine_id: str, nonce: str | None = None) -> None:
        """Freeze the machine's process, memory kept; a start resumes it."""
        can_suspend = self.driver.capabilities.suspend is not None
        await self.lifecycle.run(machine_id, lambda conn: decide(
            self._leased(conn, machine_id, nonce), Suspend(can_suspend)))

    # -- update ---------------------------------------------------------------------
    async def update(
        self, machine_id: str, config: MachineConfig, *, nonce: str | None = None,
        current_version: str | None = None, skip_launch: bool = False,
        name: str | None = None, region: str | None = None,
    ) -> MachineRow:
        def body(conn: sqlite3.Connection) -> Decision:
            row = self._leased(conn, machine_id, nonce)
            decision = decide(row, Update(
                config, new_ulid(int(self.store.clock() * 1000)),
                self.ledger.totals.millicpus_for(Ask.for_config(config)), skip_launch))
            check_update(row, config, current_version, name, region,
                         needs_command=needs_command(self.driver.capabilities, config))
            return decision

        await self.ledger.making_room(Ask.for_config(config),
                                      lambda: self.lifecycle.run(machine_id, body),
                                      exclude_machine=machine_id)
        return self.get(machine_id)

    # -- destroy --------------------------------------------------------------------
    async def destroy(self, machine_id: str, nonce: str | None = None,
                      force: bool = False, lease_override: bool = False) -> None:
        """``lease_override`` (the broker's app delete) destroys even while a lease is held."""
        await self.lifecycle.run(machine_id, lambda conn: decide(
            self._leased(conn, machine_id, nonce, lease_override), Destroy(force)))

    # -- supervision ------------------------------------------------------------------
    def drain(self) -> None:
        """The worker is stopping its machines to exit: from now on no exit restarts one."""
        self.effects.draining.set()

    async def on_exit(self, machine_id: str, handle: TaskHandle, exit_status: ExitStatus) -> None:
        """A machine's process ended on its own: record it, then apply the restart policy."""

        def body(conn: sqlite3.Connection) -> Decision:
            row = queries.get_machine(conn, machine_id)
            if row is None:
                return Decision()
            return decide(row, ExitObserved(handle.instance_id, handle.start_seq, exit_status,
                                            self.store.clock(), self.effects.draining.is_set()))

        decision = await self.lifecycle.run(machine_id, body, lock_timeout=float("inf"))
        if decision.exit_decision is not None:
            log.info("%s: exited (code %s, signal %s, oom %s): %s", machine_id,
                     exit_status.exit_code, exit_status.signal, exit_status.oom_killed,
                     decision.exit_decision)
            self.on_exit_decision(str(decision.exit_decision))

    async def check_result(self, machine_id: str, result: CheckResult) -> bool:
        """Record a health check's result; True if its status changed (an event was logged)."""

        def body(conn: sqlite3.Connection) -> Decision:
            row = queries.get_machine(conn, machine_id)
            return Decision() if row is None else decide(row, result)

        # A machine busy in an operation keeps its lock; the next probe reports again.
        decision = await self.lifecycle.run(machine_id, body, lock_timeout=1.0)
        return decision.changes.checks is not None

    # -- recovery ---------------------------------------------------------------------
    async def recover(self) -> None:
        """After a restart: resume unfinished operations, re-adopt or settle running machines."""
        unfinished: dict[str, list[Operation]] = {}
        for op in self.store.running_operations():
            unfinished.setdefault(op.resource_id, []).append(op)
        for resource_id, ops in unfinished.items():
            log.info("%s: resuming %s", resource_id,
                     ", ".join(f"{op.fsm} at {op.step}" for op in ops))
            row = queries.get_machine(self.store.db, resource_id)
            if row is not None and row.handle is not None:
                # Re-attach to the run the interrupted operation was dealing with.
                await self.driver.recover(row.handle)
            await self.lifecycle.run(resource_id, lambda _conn: Decision(), drive=True)
            # Once driven (the lock is free): a host's stop a crash cut short has ended, and
            # its machine comes back.
            task = asyncio.create_task(self._returned(resource_id, lock_timeout=float("inf")))
            self.lifecycle.background.add(task)
            task.add_done_callback(self.lifecycle.background.discard)
        for row in queries.list_machines(self.store.db):
            if row.id in unfinished:
                continue
            if row.host_stopped:
                await self._returned(row.id)
                continue
            if row.handle is None:
                continue
            decision = decide(row, Recovered())
            if decision.then:
                alive = await self.driver.recover(row.handle)
                log.info("%s: %s after restart", row.id, "re-adopted" if alive else "found exited")
                self.lifecycle.follow(row.id, decision)

    async def _returned(self, machine_id: str, lock_timeout: float = BUSY_WAIT) -> None:
        """A machine its host's stop left resting: start it again if it comes back."""
        row = queries.get_machine(self.store.db, machine_id)
        if row is None or not row.host_stopped:
            return

        def body(conn: sqlite3.Connection) -> Decision:
            found = queries.get_machine(conn, machine_id)
            return decide(found, Recovered()) if found is not None else Decision()

        try:
            decision = await self.lifecycle.run(machine_id, body, lock_timeout=lock_timeout)
        except BodegaError as exc:  # no room now, say: its mark stays for the next return
            log.warning("%s: not started again with its host: %s", machine_id, exc)
            return
        if decision.begin is not None:
            log.info("%s: started again with its host", machine_id)


def _check_signal(signal: str | int | None) -> None:
    if signal is not None:
        try:
            signal_number(signal, signals.SIGINT)
        except (KeyError, ValueError):
            raise BadRequest(f"unknown signal {signal!r}") from None
