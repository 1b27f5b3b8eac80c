"""A running vm machine's live move (``core/moves.py``), both ends: the source's handoff
names what the target's qemu must match (``leaving``), the target's import stages it
(``stage``: its start runs qemu waiting for the VM's state, ``drivers/vm/live.py``), and
the source's ``migrating`` step relays qemu's migration into the target (``migrate``:
``POST .../migrate-in``, over the workers' mTLS API), then hands over the root disk and
says how it ended (``POST .../switch``): live, the VM goes on there with its memory;
cold, when the migration failed, the target boots it afresh, as a move does any other
machine. Either way the target has it: the source's VM, stopped, goes at ``teardown``.

The pause the guest sees is qemu's own last round (``downtime``) and the disk's handover
after it, until the target's ``cont``: both are in the move's event and the log line.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Protocol, TypeVar

from bodega.model.errors import BodegaError, Conflict, NotFound
from bodega.model.ids import new_ulid
from bodega.model.machine import EventRequest
from bodega.model.states import MachineState
from bodega.wire.internal.moves import (
    ImportMachineBody,
    LiveArrival,
    LiveSwitched,
    LiveTaken,
)
from bodega.wire.internal.worker_client import WorkerClient
from bodega.worker.config import WorkerConfig
from bodega.worker.core.decisions import Decision, Restart, Start
from bodega.worker.core.payloads import MoveMachine
from bodega.worker.core.records import MachineRow
from bodega.worker.core.rules import decide
from bodega.worker.drivers.base import DriverError
from bodega.worker.drivers.vm import arrivals, live
from bodega.worker.drivers.vm.machines import kept_launch, namespace_network
from bodega.worker.ops.machines import MachineService
from bodega.worker.ops.runner import EffectFailed, Outcome
from bodega.worker.store import queries
from bodega.worker.store.database import Store

log = logging.getLogger("bodega.worker.moves")
T = TypeVar("T")
DISK = "leaving.qcow2"  # in the source's vm directory: the root disk made one file


class Handoff(Protocol):
    """The move's own handoff (``moves.MachineMoves``), which a live move rides on."""

    name: str
    store: Store
    machines: MachineService
    config: WorkerConfig

    def client(self, url: str, timeout: float = ...) -> WorkerClient: ...

    async def until_answered(self, machine_id: str, move: MoveMachine,
                             call: Callable[[WorkerClient], Awaitable[T]]) -> T: ...


class LiveMoves:
    def __init__(self, moves: Handoff) -> None:
        self.moves = moves
        self.config = moves.config

    # -- the source ------------------------------------------------------------------------
    async def leaving(self, row: MachineRow) -> LiveArrival:
        """What the target's qemu must match; the VM's sockets set aside for its names."""
        directory = arrivals.vm_dir(self.config.machine_dir(row.id))
        launch = kept_launch(directory)
        if launch is None or not launch.mac:
            raise EffectFailed(f"machine {row.id}'s VM has no kept launch to move live")
        try:
            size = await live.disk_bytes(directory / "root.qcow2")
        except DriverError as exc:
            raise EffectFailed(str(exc)) from exc
        arrivals.set_aside(row.id, directory.parent)
        return LiveArrival(mac=launch.mac, disk_bytes=size)

    def stays(self, row: MachineRow) -> None:
        """The target refused it: the VM runs on here, its sockets where they were."""
        arrivals.put_back(row.id, self.config.machine_dir(row.id))

    async def migrate(self, row: MachineRow, move: MoveMachine) -> Outcome:
        """``migrating``: the VM's state to the target, then how it goes on there."""
        machine_dir = self.config.machine_dir(row.id)
        path = f"/v1/machines/{row.id}"
        params = {"move_id": move.move_id}
        began = time.monotonic()

        async def send(chunks: AsyncIterator[bytes]) -> None:
            async with self.moves.client(move.target_url, live.MIGRATION_TIMEOUT) as client:
                said = await client.exchange("POST", f"{path}/migrate-in", params=params,
                                             chunks=chunks, timeout=live.MIGRATION_TIMEOUT)
            taken = LiveTaken.model_validate_json(said or b"{}")
            if taken.status != "completed":
                raise DriverError(f"worker {move.target} did not load the VM: {taken.status}")

        disk = arrivals.vm_dir(machine_dir) / DISK
        try:
            migration = await live.migrate_out(row.id, machine_dir, send)
            stopped = time.monotonic()  # the source's vCPUs stopped for good a moment ago
            await live.flat_disk(arrivals.vm_dir(machine_dir) / "root.qcow2", disk)
        except (DriverError, BodegaError, OSError) as exc:
            return await self._afresh(row, move, str(exc) or type(exc).__name__)
        qemu_ms = migration.downtime or 0

        def so_far() -> str:  # the pause until now: the target adds its own part
            return str(qemu_ms + int((time.monotonic() - stopped) * 1000))

        try:
            said = await self.moves.until_answered(row.id, move, lambda client: client.exchange(
                "POST", f"{path}/switch", chunks=live.read_file(disk), params={
                    **params, "mode": "live", "source": self.moves.name,
                    "paused_ms": so_far()}))
        except EffectFailed as exc:  # it is the target's now, whatever it said: ours goes
            return Outcome(payload=replace(move, migrated=f"refused: {exc}"[:500]))
        switched = LiveSwitched.model_validate_json(said or b"{}")
        arrivals.remove(disk)
        paused = qemu_ms + int((time.monotonic() - stopped) * 1000)
        log.info("%s: moved live to %s in %.2f s: %s, the guest paused %d ms (qemu's last "
                 "round %d ms, the disk after it)", row.id, move.target,
                 time.monotonic() - began, switched.migrated, paused, qemu_ms)
        return Outcome(payload=replace(
            move, migrated=f"{switched.migrated}: the guest paused {paused} ms"))

    async def _afresh(self, row: MachineRow, move: MoveMachine, why: str) -> Outcome:
        """The live step failed: the target, which has the machine, boots it afresh. Never
        a failure here: the step ends, so ``teardown`` ends the VM on this side."""
        log.warning("%s: live move to %s failed (%s): it boots there afresh", row.id,
                    move.target, why)
        params = {"move_id": move.move_id, "mode": "cold", "why": why[:300],
                  "source": self.moves.name}
        try:
            await self.moves.until_answered(row.id, move, lambda client: client.exchange(
                "POST", f"/v1/machines/{row.id}/switch", params=params))
        except EffectFailed as exc:
            return Outcome(payload=replace(move, migrated=f"refused: {exc}"[:500]))
        return Outcome(payload=replace(move, migrated=f"cold: {why}"[:500]))

    # -- the target ------------------------------------------------------------------------
    def stage(self, body: ImportMachineBody) -> None:
        """Before the import's commit: its start runs qemu waiting for the VM's state."""
        assert body.live is not None
        arrivals.stage_arrival(self.config.machine_dir(body.id), arrivals.Arrival(
            move_id=body.move_id, mac=body.live.mac, disk_bytes=body.live.disk_bytes))

    def unstage(self, body: ImportMachineBody) -> None:
        arrivals.clear_arrival(self.config.machine_dir(body.id))

    def _arrival(self, machine_id: str, move_id: str) -> tuple[MachineRow, bool]:
        """The machine the move brought, and whether its VM still waits for that move."""
        row = queries.get_machine(self.moves.store.db, machine_id)
        if row is None:
            raise NotFound(f"machine {machine_id} is not on worker {self.moves.name}")
        staged = arrivals.arrival_of(self.config.machine_dir(machine_id))
        return row, staged is not None and staged.move_id == move_id

    async def take_state(self, machine_id: str, move_id: str,
                         chunks: AsyncIterator[bytes]) -> LiveTaken:
        """``migrate-in``: the source's stream into the VM's waiting qemu."""
        _row, waiting = self._arrival(machine_id, move_id)
        if not waiting:
            raise Conflict(f"machine {machine_id} waits for no state of move {move_id}")
        try:
            migration = await live.migrate_in(machine_id, chunks)
        except DriverError as exc:
            raise Conflict(f"machine {machine_id}'s VM did not take its state: {exc}") from exc
        return LiveTaken(status=migration.status, total_ms=migration.total_time)

    async def switch(self, machine_id: str, move_id: str, mode: str, source: str,
                     why: str, paused_ms: int, disk: AsyncIterator[bytes]) -> LiveSwitched:
        """``switch``: the VM goes on here, with its state (live) or afresh (cold)."""
        row, waiting = self._arrival(machine_id, move_id)
        machine_dir = self.config.machine_dir(machine_id)
        if not waiting:  # an earlier try's switch did it
            async for _ in disk:
                pass
            return LiveSwitched(migrated=mode)
        if mode == "live":
            root = arrivals.vm_dir(machine_dir) / "root.qcow2"
            began = time.monotonic()
            try:
                await live.arrive(machine_id, root, disk, lambda: self._addresses(row))
                arrivals.clear_arrival(machine_dir)
                paused_ms += int((time.monotonic() - began) * 1000)
                self._event(row, source, EventRequest(
                    reason=f"live from {source}: the guest paused {paused_ms} ms",
                    moved_from=source, moved_to=self.moves.name, migrated="live",
                    downtime_ms=paused_ms))
                return LiveSwitched(migrated="live")
            except DriverError as exc:
                why = f"its state did not go on here: {exc}"
        await self._cold(row)
        self._event(row, source, EventRequest(
            reason=f"booted afresh: the live move failed ({why})"[:500], moved_from=source,
            moved_to=self.moves.name, migrated="cold"))
        return LiveSwitched(migrated="cold")

    async def _addresses(self, row: MachineRow) -> tuple[str, ...]:
        if row.netns is None:
            raise DriverError(f"machine {row.id} has no namespace here")
        network = await namespace_network(row.netns)
        return (",".join(network.addresses) or "-", network.gateway4 or "-",
                network.gateway6 or "-")

    async def _cold(self, row: MachineRow) -> None:
        """The waiting qemu ended and the machine started afresh (``prepare`` makes its
        disk over this worker's image, as for any start)."""
        arrivals.clear_arrival(self.config.machine_dir(row.id))

        def body(conn: sqlite3.Connection) -> Decision:
            found = queries.get_machine(conn, row.id)
            if found is None:
                raise NotFound(f"machine {row.id} is gone")
            if found.state == MachineState.STARTED:
                return decide(found, Restart())
            return decide(found, Start())

        await self.moves.machines.lifecycle.run(row.id, body)

    def _event(self, row: MachineRow, source: str, request: EventRequest) -> None:
        store = self.moves.store
        event = store.new_event("move", "migrated", "flyd", request)
        with store.tx() as conn:
            store.append(conn, op_id=new_ulid(int(store.clock() * 1000)), resource_id=row.id,
                         fsm="move", step="migrated", event=event,
                         payload={"from": source, "to": self.moves.name})
        log.info("%s: %s", row.id, request.reason)
