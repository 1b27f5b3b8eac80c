"""Machine lifecycle: the checks that let an operation begin, then the operation.

Each entry point takes the machine's lock, runs one transaction that checks
the lease, the current state and (when the machine will hold compute) the
room on this host, and records the operation's first step. The operation is
then driven to its end in the background while the lock is held, so calls
return as soon as the work is durably recorded, as the Machines API does.
"""

from __future__ import annotations

import asyncio
import logging
import signal as signals
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, Conflict, NotFound, PreconditionFailed
from bodega.model.ids import MACHINE_ID_RE, NAME_RE, new_machine_id, new_machine_name, new_ulid
from bodega.model.machine import ExitStatus
from bodega.model.machine_config import MachineConfig
from bodega.model.states import MachineState as S
from bodega.worker import leases, queries
from bodega.worker.claims import attach_volume, check_update, claim_room
from bodega.worker.effects import MachineEffects, signal_number
from bodega.worker.fsm import BEGINS, RESTART_WINDOW, ExitDecision, after_exit, restart_delay
from bodega.worker.ledger import CapacityRejected, Ledger
from bodega.worker.locks import MachineLocks
from bodega.worker.network import WIRE_AHEAD
from bodega.worker.records import MachineRow
from bodega.worker.runner import Runner
from bodega.worker.store import Operation, Store
from bodega.worker.supervision import Supervision

log = logging.getLogger("bodega.worker.machines")


@dataclass(frozen=True)
class CreateRequest:
    app: str
    config: MachineConfig
    region: str
    name: str | None = None
    generated_name: bool = False  # ``name`` was made up, not asked for: replace it if taken
    machine_id: str | None = None
    reservation_id: str | None = None
    skip_launch: bool = False
    skip_service_registration: bool = False
    lease_ttl: int | None = None
    idempotency_key: str | None = None
    placement: dict[str, Any] | None = None
    owner: str = "bodega"


class MachineService:
    def __init__(
        self,
        store: Store,
        ledger: Ledger,
        runner: Runner,
        effects: MachineEffects,
        ip_range: tuple[int, int],
    ) -> None:
        self.store = store
        self.ledger = ledger
        self.runner = runner
        self.effects = effects
        self.driver = effects.driver
        self.ip_range = ip_range
        self.locks = MachineLocks()
        # Set whenever an address is taken or given back, or a machine comes to rest: the
        # worker then wires spare namespaces and parks launchers in idle ones.
        self.spares_changed = asyncio.Event()
        self.supervision = Supervision(self.driver, self.on_exit)
        # Told what the restart policy decided for each exit (the daemon counts them).
        self.on_exit_decision: Callable[[str], None] = lambda _decision: None
        self._background: set[asyncio.Task[Any]] = set()
        runner.after_final["start_machine"] = self._after_run
        runner.after_final["restart_machine"] = self._after_run
        runner.after_final["update_machine"] = self._after_run
        runner.after_final["stop_machine"] = self._after_stop
        runner.final_hooks["destroy_machine"] = self._on_destroyed
        runner.final_hooks["create_machine"] = self._on_created

    # -- helpers ------------------------------------------------------------------
    def get(self, machine_id: str) -> MachineRow:
        if not MACHINE_ID_RE.match(machine_id):
            raise NotFound(f"machine not found: {machine_id!r} is not a machine id")
        row = queries.get_machine(self.store.db, machine_id)
        if row is None:
            raise NotFound(f"machine not found: {machine_id}")
        return row

    def _begin_allowed(self, fsm: str, row: MachineRow) -> bool:
        """True if ``fsm`` may begin; False if the machine is already where it would lead."""
        allowed = BEGINS[fsm]
        if row.state not in allowed:
            raise PreconditionFailed(
                f"failed_precondition: cannot {fsm.removesuffix('_machine')} machine {row.id} "
                f"in state {row.state}"
            )
        return allowed[row.state] is not None

    def _drive_pending(self, machine_id: str, lock: asyncio.Lock) -> None:
        """Drive the operations a finished one began (in order), then release the lock."""

        async def drive() -> None:
            try:
                while True:
                    pending = [op for op in self.store.running_operations()
                               if op.resource_id == machine_id]
                    if not pending:
                        return
                    await self.runner.drive(pending[0])
            except Exception:
                log.exception("%s: driving failed", machine_id)
            finally:
                lock.release()

        task = asyncio.create_task(drive())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def settle(self) -> None:
        """Wait until no operation or exit handling is under way (tests and shutdown)."""
        while True:
            for _ in range(5):
                await asyncio.sleep(0)  # let watchers woken by an exit reach on_exit
            pending = self._background | self.supervision.exiting
            if not pending:
                return
            await asyncio.gather(*pending, return_exceptions=True)

    # -- create ---------------------------------------------------------------------
    async def create(self, req: CreateRequest) -> tuple[MachineRow, str | None]:
        """Create (and unless ``skip_launch``, start) a machine; returns once it is recorded."""
        machine_id = req.machine_id or new_machine_id()
        if not MACHINE_ID_RE.match(machine_id):
            raise BadRequest(f"invalid machine id {machine_id!r}")
        name = req.name or new_machine_name()
        if not NAME_RE.match(name):
            raise BadRequest(f"invalid machine name {name!r}: use lowercase letters, digits, -")
        if self.driver.name == "process" and not req.config.command():
            raise BadRequest(
                "the process driver runs config.init.exec (or init.entrypoint + init.cmd, "
                "or processes[0].exec); none was given"
            )
        if req.idempotency_key:  # a retry: answer at once, not after the first try's start
            earlier = queries.machine_by_idempotency_key(self.store.db, req.app,
                                                        req.idempotency_key)
            if earlier is not None:
                return earlier, None
        lock = await self.locks.acquire(machine_id)
        try:
            existing, nonce = self._begin_create(req, machine_id, name,
                                                 rename=req.name is None or req.generated_name)
            if existing is not None:
                lock.release()
                return existing, None
        except BaseException:
            lock.release()
            raise
        # The machine is durably created (its first step is committed): like the Machines
        # API, answer now, in state "created", and let the operation run on; clients /wait.
        self._drive_pending(machine_id, lock)
        return self.get(machine_id), nonce

    def _begin_create(
        self, req: CreateRequest, machine_id: str, name: str, rename: bool
    ) -> tuple[MachineRow | None, str | None]:
        """Record the machine and its create operation; or the machine an earlier try made."""
        now = self.store.clock()
        ask = Ask.for_config(req.config)
        with self.store.tx() as conn:
            if req.idempotency_key:
                earlier = queries.machine_by_idempotency_key(conn, req.app, req.idempotency_key)
                if earlier is not None:
                    return earlier, None
            earlier = queries.get_machine(conn, machine_id)
            if earlier is not None:
                if earlier.app != req.app:
                    raise Conflict(f"machine id {machine_id} is taken")
                return earlier, None
            while queries.machine_name_taken(conn, req.app, name):
                if not rename:
                    raise Conflict(f"a machine named {name!r} already exists in app {req.app}",
                                   status="name_taken")
                name = new_machine_name()  # a made-up name collided: make up another
            claim_room(conn, self.ledger, req.reservation_id, ask, machine_id)
            volume_id = attach_volume(conn, req.app, req.config, machine_id, now)
            ip_index = self._free_address(conn)
            if ip_index is None:
                raise CapacityRejected("could not reserve resource for machine: no free addresses",
                                       details={"full": True})  # room by the figures, yet full
            instance_id = new_ulid(int(now * 1000))
            row = MachineRow(
                id=machine_id, app=req.app, name=name, region=req.region, state=S.CREATED,
                instance_id=instance_id, config=req.config,
                millicpus=self.ledger.totals.millicpus_for(ask), memory_mb=ask.memory_mb,
                gpus=ask.gpus, gpu_kind=ask.gpu_kind, ip_index=ip_index,
                private_ip=self.effects.network.address(ip_index),
                netns=None, cordoned=req.skip_service_registration, holds_compute=True,
                handle=None, start_seq=0, restarts=0, volume_id=volume_id,
                placement=req.placement, idempotency_key=req.idempotency_key, last_exit=None,
                created_at=now, updated_at=now,
            )
            queries.insert_machine(conn, row)
            queries.insert_version(conn, machine_id, instance_id,
                                  req.config.model_dump_json(exclude_none=True), now)
            nonce = None
            if req.lease_ttl:
                lease = leases.acquire(
                    conn, machine_id, version=instance_id, ttl=req.lease_ttl, description="",
                    owner=req.owner, nonce=None, now=now,
                )
                nonce = lease.nonce
            self.runner.begin(conn, "create_machine", machine_id,
                              {"source": "user", "launch": not req.skip_launch})
            self.spares_changed.set()
            return None, nonce

    def _free_address(self, conn: Any) -> int | None:
        """The lowest free address whose namespace is already wired, else the lowest free."""
        free = queries.free_ip_indexes(conn, *self.ip_range, WIRE_AHEAD + 1)
        return next((i for i in free if self.effects.network.ready(i)), free[0] if free else None)

    def _on_created(self, conn: Any, op: Operation, _step: Any) -> None:
        # The start begins in the same commit that ends the create, so a crash in
        # between can never leave a machine created that was asked to launch.
        if op.payload.get("launch"):
            row = queries.get_machine(conn, op.resource_id)
            assert row is not None
            self._begin_start(conn, row, "flyd", delay=0.0)

    # -- start, stop, restart ------------------------------------------------------------
    def _begin_start(self, conn: Any, row: MachineRow, source: str, delay: float) -> Operation:
        if not row.holds_compute:
            self.ledger.check_room(conn, Ask.for_config(row.config), exclude_machine=row.id)
        start_seq = row.start_seq + 1
        queries.update_machine(conn, row.id, self.store.clock(), holds_compute=True,
                              start_seq=start_seq)
        payload = {"source": source, "start_seq": start_seq, "delay": delay}
        return self.runner.begin(conn, "start_machine", row.id, payload)

    async def start(self, machine_id: str, nonce: str | None = None) -> dict[str, Any]:
        lock = await self.locks.acquire(machine_id)
        try:
            with self.store.tx() as conn:
                row = self.get(machine_id)
                leases.check(conn, machine_id, nonce, self.store.clock())
                previous = row.state
                if not self._begin_allowed("start_machine", row):
                    lock.release()
                    return {"previous_state": previous, "migrated": False, "new_host": ""}
                if previous == S.STOPPED or previous == S.FAILED:
                    queries.update_machine(conn, row.id, self.store.clock(), restarts=0)
                op = self._begin_start(conn, row, "user", delay=0.0)
        except BaseException:
            lock.release()
            raise
        self._drive_pending(op.resource_id, lock)
        return {"previous_state": previous, "migrated": False, "new_host": ""}

    async def stop(
        self, machine_id: str, nonce: str | None = None, signal: str | int | None = None,
        timeout: float | None = None, lease_override: bool = False,
    ) -> None:
        """``lease_override``: the worker's own stop on exit, which no lease may refuse."""
        await self._begin_simple("stop_machine", machine_id, nonce, signal, timeout,
                                 lease_override)

    async def restart(
        self, machine_id: str, nonce: str | None = None, signal: str | int | None = None,
        timeout: float | None = None,
    ) -> None:
        await self._begin_simple("restart_machine", machine_id, nonce, signal, timeout)

    async def _begin_simple(
        self, fsm: str, machine_id: str, nonce: str | None, signal: str | int | None,
        timeout: float | None, lease_override: bool = False,
    ) -> None:
        if signal is not None:
            try:
                signal_number(signal, signals.SIGINT)
            except (KeyError, ValueError):
                raise BadRequest(f"unknown signal {signal!r}") from None
        lock = await self.locks.acquire(machine_id)
        try:
            with self.store.tx() as conn:
                row = self.get(machine_id)
                if not lease_override:
                    leases.check(conn, machine_id, nonce, self.store.clock())
                if not self._begin_allowed(fsm, row):
                    lock.release()
                    return
                payload: dict[str, Any] = {"source": "user"}
                if signal is not None:
                    payload["signal"] = signal
                if timeout is not None:
                    payload["timeout"] = timeout
                if fsm == "restart_machine":
                    payload["start_seq"] = row.start_seq + 1
                    queries.update_machine(conn, row.id, self.store.clock(),
                                          start_seq=row.start_seq + 1)
                op = self.runner.begin(conn, fsm, machine_id, payload)
        except BaseException:
            lock.release()
            raise
        self._drive_pending(op.resource_id, lock)

    # -- update ---------------------------------------------------------------------
    async def update(
        self, machine_id: str, config: MachineConfig, *, nonce: str | None = None,
        current_version: str | None = None, skip_launch: bool = False,
        name: str | None = None, region: str | None = None,
    ) -> MachineRow:
        lock = await self.locks.acquire(machine_id)
        try:
            with self.store.tx() as conn:
                row = self.get(machine_id)
                leases.check(conn, machine_id, nonce, self.store.clock())
                self._begin_allowed("update_machine", row)
                check_update(row, config, current_version, name, region,
                             needs_command=self.driver.name == "process")
                op = self._begin_update(conn, row, config, skip_launch)
        except BaseException:
            lock.release()
            raise
        self._drive_pending(op.resource_id, lock)
        return self.get(machine_id)

    def _begin_update(
        self, conn: Any, row: MachineRow, config: MachineConfig, skip_launch: bool
    ) -> Operation:
        now = self.store.clock()
        launch = row.state == S.STARTED or not skip_launch
        ask = Ask.for_config(config)
        holds = row.holds_compute or launch
        if holds:
            try:
                self.ledger.check_room(conn, ask, exclude_machine=row.id)
            except CapacityRejected as exc:
                raise Conflict(f"aborted: {exc.message}", status=exc.status,
                               details=exc.details) from None
        instance_id = new_ulid(int(now * 1000))
        start_seq = row.start_seq + 1 if launch else row.start_seq
        queries.update_machine(
            conn, row.id, now, config=config, instance_id=instance_id,
            millicpus=self.ledger.totals.millicpus_for(ask), memory_mb=ask.memory_mb,
            gpus=ask.gpus, gpu_kind=ask.gpu_kind, holds_compute=holds, start_seq=start_seq,
            restarts=0,
        )
        queries.insert_version(conn, row.id, instance_id,
                              config.model_dump_json(exclude_none=True), now)
        queries.replace_versions(conn, row.id, keep=instance_id)
        rest_state = S.CREATED if row.state == S.CREATED else S.STOPPED
        payload = {"source": "user", "launch": launch, "rest_state": str(rest_state),
                   "start_seq": start_seq}
        return self.runner.begin(conn, "update_machine", row.id, payload)

    # -- destroy --------------------------------------------------------------------
    async def destroy(self, machine_id: str, nonce: str | None = None,
                      force: bool = False, lease_override: bool = False) -> None:
        """``lease_override`` (the broker's app delete) destroys even while a lease is held."""
        lock = await self.locks.acquire(machine_id)
        try:
            with self.store.tx() as conn:
                row = self.get(machine_id)
                if not lease_override:
                    leases.check(conn, machine_id, nonce, self.store.clock())
                if row.state == S.DESTROYED:
                    raise NotFound(f"machine not found: {machine_id} was destroyed")
                self._begin_allowed("destroy_machine", row)
                if row.state == S.STARTED and not force:
                    raise PreconditionFailed(
                        f"failed_precondition: unable to destroy machine {machine_id}, not "
                        "currently stopped, suspended or failed; stop it first or use force=true"
                    )
                payload = {"source": "user", "signal": "SIGKILL" if force else None,
                           "timeout": 0.0 if force else None}
                op = self.runner.begin(conn, "destroy_machine", machine_id,
                                       {k: v for k, v in payload.items() if v is not None})
        except BaseException:
            lock.release()
            raise
        self._drive_pending(op.resource_id, lock)

    def _on_destroyed(self, conn: Any, op: Operation, _step: Any) -> None:
        now = self.store.clock()
        row = queries.get_machine(conn, op.resource_id)
        if row is not None and row.volume_id:
            queries.update_volume(conn, row.volume_id, now, attached_machine_id=None)
        queries.delete_lease(conn, op.resource_id)
        queries.update_machine(conn, op.resource_id, now, holds_compute=False, handle=None)
        self.spares_changed.set()

    # -- supervision ------------------------------------------------------------------
    def drain(self) -> None:
        """The worker is stopping its machines to exit: from now on no exit restarts one."""
        self.effects.draining.set()

    async def _after_run(self, op: Operation) -> None:
        row = queries.get_machine(self.store.db, op.resource_id)
        if row is not None and row.state == S.STARTED and row.handle is not None:
            self.supervision.watch(row.id, row.handle)

    async def _after_stop(self, _op: Operation) -> None:
        self.spares_changed.set()

    async def on_exit(self, machine_id: str, handle: Any, exit_status: ExitStatus) -> None:
        """A machine's process ended on its own: record it, then apply the restart policy."""
        lock = await self.locks.acquire(machine_id, timeout=float("inf"))
        op: Operation | None = None
        try:
            row = queries.get_machine(self.store.db, machine_id)
            if (row is None or row.state != S.STARTED or row.handle is None
                    or row.handle.start_seq != handle.start_seq
                    or row.handle.instance_id != handle.instance_id):
                return  # an operation stopped it on purpose and recorded the exit itself
            op = self._record_exit(row, exit_status)
        finally:
            if op is None:
                lock.release()
        if op is not None:
            self._drive_pending(op.resource_id, lock)

    def _record_exit(self, row: MachineRow, exit_status: ExitStatus) -> Operation | None:
        now = self.store.clock()
        policy, max_retries = row.config.restart_policy()
        if self.effects.draining.is_set():
            policy = "no"  # a restart now would outlive the worker that is stopping it
        ran_for = now - (row.handle.started_at if row.handle else now)
        restarts = 0 if ran_for > RESTART_WINDOW else row.restarts
        decision = after_exit(policy, max_retries, restarts, exit_status,
                              bool(row.config.auto_destroy))
        status = {ExitDecision.RESTART: "restarting", ExitDecision.STOP: "stopped",
                  ExitDecision.DESTROY: "destroying"}[decision]
        event = self.store.new_event("exit", status, "flyd", exit_status.to_event_request())
        log.info("%s: exited (code %s, signal %s, oom %s): %s", row.id, exit_status.exit_code,
                 exit_status.signal, exit_status.oom_killed, decision)
        self.on_exit_decision(str(decision))
        with self.store.tx() as conn:
            self.store.append(conn, op_id="supervise", resource_id=row.id, fsm="supervise",
                              step="exit", payload={"decision": str(decision)}, event=event)
            queries.update_machine(conn, row.id, now, last_exit=exit_status)
            if decision is ExitDecision.RESTART:
                queries.update_machine(conn, row.id, now, restarts=restarts + 1)
                fresh = replace(row, restarts=restarts + 1)
                return self._begin_start(conn, fresh, "flyd", delay=restart_delay(restarts))
            if decision is ExitDecision.DESTROY:
                return self.runner.begin(conn, "destroy_machine", row.id,
                                         {"source": "flyd", "signal": "SIGKILL", "timeout": 0})
            queries.update_machine(conn, row.id, now, state=S.STOPPED, holds_compute=False)
            self.spares_changed.set()
            return None

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
            lock = await self.locks.acquire(resource_id)
            self._drive_pending(resource_id, lock)
        for row in queries.list_machines(self.store.db):
            if row.id in unfinished or row.state != S.STARTED or row.handle is None:
                continue
            alive = await self.driver.recover(row.handle)
            log.info("%s: %s after restart", row.id, "re-adopted" if alive else "found exited")
            self.supervision.watch(row.id, row.handle)

