"""What can be done to a machine besides moving it through its lifecycle.

Signal, exec, a console, ps, cordon, metadata, leases, events, versions and ``wait``:
none of them starts an operation, but every change is still logged.
"""

from __future__ import annotations

import contextlib
import os
import signal as signals
from collections.abc import AsyncIterator
from typing import TypedDict

from bodega.model.console import TerminalSize
from bodega.model.errors import (
    BadRequest,
    Conflict,
    NotFound,
    PreconditionFailed,
    Timeout,
    Unavailable,
)
from bodega.model.machine import MachineEvent
from bodega.model.machine_answers import MachineVersion, WaitAnswer
from bodega.model.states import PERSISTENT, MachineState
from bodega.worker.core.decisions import Cordon, SetMetadata, Signal
from bodega.worker.core.records import LeaseRow, MachineRow
from bodega.worker.core.rules import decide
from bodega.worker.drivers.base import (
    Busy,
    ConsoleSession,
    ExecResult,
    GuestConsole,
    NoAnswer,
    ProcessInfo,
    TaskControl,
    TaskGone,
)
from bodega.worker.drivers.vm.guest_exec import EXEC_STDIN_LIMIT
from bodega.worker.ops.effects import signal_number
from bodega.worker.ops.machines import MachineService
from bodega.worker.ops.terminal import Terminal
from bodega.worker.ops.watch import StateWatch
from bodega.worker.store import leases, queries

WAIT_MAX = 60
WAIT_STATES = frozenset({"started", "stopped", "suspended", "destroyed", "failed", "settled"})


class ActionNote(TypedDict, total=False):
    """What the log keeps of an action on a running machine (the audit trail, GET /log)."""

    signal: str  # a signal sent, by name
    command: list[str]  # an exec's or a console's command, its first 16 words


class MachineActions:
    def __init__(self, machines: MachineService, watch: StateWatch) -> None:
        self.machines = machines
        self.store = machines.store
        self.driver = machines.driver
        self.recorder = machines.lifecycle.recorder
        self.watch = watch

    def _log(self, machine_id: str, step: str, payload: ActionNote) -> None:
        with self.store.tx() as conn:
            self.store.append(conn, op_id="action", resource_id=machine_id, fsm="action",
                              step=step, payload=payload)

    def _running(self, machine_id: str) -> MachineRow:
        row = self.machines.get(machine_id)
        if row.state != MachineState.STARTED or row.handle is None:
            raise PreconditionFailed(
                f"failed_precondition: machine {machine_id} is {row.state}, not started"
            )
        return row

    def _control(self) -> TaskControl:
        control = self.driver.capabilities.control
        if control is None:
            raise BadRequest(f"unimplemented: the {self.driver.name} driver cannot reach into "
                             "a running machine (signal, exec, ps)")
        return control

    # -- signal, exec, ps ---------------------------------------------------------------
    async def signal(self, machine_id: str, signal: str | int | None) -> None:
        try:
            number = signal_number(signal, 0)
        except (KeyError, ValueError):
            raise BadRequest(f"unknown signal {signal!r}") from None
        if number == 0:
            raise BadRequest("signal is required, e.g. {\"signal\": \"SIGHUP\"}")
        control = self._control()
        row = self.machines.get(machine_id)
        decide(row, Signal())  # refuses unless it is started
        assert row.handle is not None
        self._log(machine_id, "signal", {"signal": signals.Signals(number).name})
        await control.signal(row.handle, number)

    async def exec(
        self, machine_id: str, command: list[str], timeout: float, stdin: str | None,
        nonce: str | None,
    ) -> ExecResult:
        if not command or not all(isinstance(part, str) for part in command):
            raise BadRequest("command must be a non-empty list of strings")
        if not 0 < timeout <= 600:
            raise BadRequest("timeout must be between 1 and 600 seconds")
        with self.store.tx() as conn:
            leases.check(conn, machine_id, nonce, self.store.clock())
        row = self._running(machine_id)
        assert row.handle is not None
        self._log(machine_id, "exec", {"command": command[:16]})
        # The environment the worker built for the program's start, built again the same way.
        spec = self.machines.effects.task_spec(row)
        data = stdin.encode() if stdin is not None else None
        if spec.isolation == "vm" and data is not None and len(data) > EXEC_STDIN_LIMIT:
            raise BadRequest(f"an exec into a vm machine takes {EXEC_STDIN_LIMIT} bytes of "
                             f"stdin at most, not {len(data)}")
        try:
            return await self._control().exec(row.handle, spec, command, timeout, data)
        except TaskGone as exc:
            raise PreconditionFailed(f"failed_precondition: {exc}") from None
        except NoAnswer as exc:
            raise _not_answering(exc) from None

    @contextlib.asynccontextmanager
    async def console(self, machine_id: str, command: list[str], size: TerminalSize
                      ) -> AsyncIterator[ConsoleSession]:
        """A console's ``command`` (empty: the machine's shell) started where an exec runs,
        on a terminal of ``size``, while held; closed (hung up, its program's end waited
        for) on the way out. 412 unless the machine is started, 409 while a vm machine has
        its one console open, 503 while its VM does not answer (booting)."""
        row = self._running(machine_id)
        assert row.handle is not None
        control = self._control()
        spec = self.machines.effects.task_spec(row)
        async with contextlib.AsyncExitStack() as stack:
            try:
                start = await stack.enter_async_context(
                    control.console(row.handle, spec, command))
                if isinstance(start, GuestConsole):
                    session: ConsoleSession = await start.start(size)
                else:
                    session = await Terminal.start(start, size)
            except TaskGone as exc:
                raise PreconditionFailed(f"failed_precondition: {exc}") from None
            except Busy as exc:
                raise Conflict(f"failed_precondition: {exc}") from None
            except NoAnswer as exc:
                raise _not_answering(exc) from None
            except OSError as exc:
                raise Unavailable(f"unavailable: no terminal for machine {machine_id}'s "
                                  f"console: {_why(exc)}") from None
            stack.push_async_callback(session.close)
            self._log(machine_id, "console", {"command": command[:16]})
            yield session

    async def ps(self, machine_id: str) -> list[ProcessInfo]:
        row = self.machines.get(machine_id)
        if row.handle is None or row.state != MachineState.STARTED:
            return []
        return await self._control().ps(row.handle)

    # -- cordon, metadata: record changes the core decides -----------------------------
    def cordon(self, machine_id: str, cordoned: bool, nonce: str | None) -> None:
        with self.store.tx() as conn:
            row = self.machines.get(machine_id)
            leases.check(conn, machine_id, nonce, self.store.clock())
            self.recorder.apply(conn, machine_id, decide(row, Cordon(cordoned)))

    def metadata(self, machine_id: str) -> dict[str, str]:
        return dict(self.machines.get(machine_id).config.metadata or {})

    def set_metadata(
        self, machine_id: str, changes: dict[str, str | None], version: str | None = None
    ) -> dict[str, str]:
        with self.store.tx() as conn:
            decision = decide(self.machines.get(machine_id), SetMetadata(changes, version))
            self.recorder.apply(conn, machine_id, decision)
        config = decision.changes.config
        return dict(config.metadata or {}) if config is not None else {}

    # -- leases ----------------------------------------------------------------------
    def acquire_lease(
        self, machine_id: str, ttl: int, description: str, owner: str, nonce: str | None
    ) -> LeaseRow:
        with self.store.tx() as conn:
            row = self.machines.get(machine_id)
            return leases.acquire(conn, machine_id, version=row.instance_id, ttl=ttl,
                                  description=description, owner=owner, nonce=nonce,
                                  now=self.store.clock())

    def lease(self, machine_id: str) -> LeaseRow:
        self.machines.get(machine_id)
        return leases.get(self.store.db, machine_id, self.store.clock())

    def release_lease(self, machine_id: str, nonce: str | None) -> None:
        with self.store.tx() as conn:
            self.machines.get(machine_id)
            leases.release(conn, machine_id, nonce, self.store.clock())

    # -- events, versions, wait --------------------------------------------------------------
    def events(self, machine_id: str, limit: int = 20) -> list[MachineEvent]:
        self.machines.get(machine_id)
        limit = max(1, min(limit, 50))
        return self.store.events(machine_id, limit)

    def versions(self, machine_id: str) -> list[MachineVersion]:
        self.machines.get(machine_id)
        return queries.list_versions(self.store.db, machine_id)

    async def wait(
        self, machine_id: str, states: list[str], timeout: int, version: str | None,
        from_event_id: str | None,
    ) -> WaitAnswer:
        wanted = set(states or ["started"])
        unknown = wanted - WAIT_STATES
        if unknown:
            raise BadRequest(f"invalid_argument: cannot wait for state {sorted(unknown)[0]!r}")
        if not 1 <= timeout <= WAIT_MAX:
            raise BadRequest(f"invalid_argument: timeout must be between 1 and {WAIT_MAX}")
        row = self.machines.get(machine_id)

        def reached() -> bool:
            nonlocal row
            row = self.machines.get(machine_id)
            if row.state == MachineState.DESTROYED and "destroyed" not in wanted:
                # Gone for good (destroyed, or auto_destroy after its exit): it can never
                # reach the state asked for, so say so now rather than at the timeout.
                raise NotFound(f"machine not found: {machine_id} was destroyed")
            if version is not None and row.instance_id != version:
                return row.state == MachineState.DESTROYED and "destroyed" in wanted
            if from_event_id is not None:
                latest = self.store.events(machine_id, 1)
                if not latest or latest[0].id <= from_event_id:
                    return False
            if "settled" in wanted and row.state in PERSISTENT:
                return True
            return row.state in wanted

        if not await self.watch.wait_until(machine_id, reached, float(timeout)):
            want = ",".join(sorted(wanted))
            raise Timeout(
                f"deadline_exceeded: machine failed to reach desired state, {want}, "
                f"currently {row.state}"
            )
        latest = self.store.events(machine_id, 1)
        return WaitAnswer(ok=True, state=row.state, version=row.instance_id,
                          event_id=latest[0].id if latest else None)


def parse_wait_states(values: list[str]) -> list[str]:
    states: list[str] = []
    for value in values:
        states.extend(part.strip() for part in value.split(",") if part.strip())
    return states


def _why(exc: OSError) -> str:
    """A few words on why a terminal could not be made ("no such file or directory")."""
    return os.strerror(exc.errno).lower() if exc.errno else str(exc)


def _not_answering(exc: NoAnswer) -> Unavailable:
    """A guest that does not answer yet (a VM booting): 503, asked again in a second."""
    unavailable = Unavailable(str(exc))
    unavailable.retry_after = 1.0
    return unavailable
