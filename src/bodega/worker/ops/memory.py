"""A machine's memory through the API: read its limit, set it live, reclaim.

Each call holds the machine's lock, so no start or stop runs beside it (a start
makes the cgroup this writes to). A limit is set in the kernel first (which may
refuse: the kernel could not reclaim down to it) and then recorded on the
machine's row with an entry in the log, so every later run of the machine, and
a worker restarted under a running one, keep it (``MachineRow.memory_limit``).
The ledger still counts the whole reservation: a lower limit frees nothing for
other machines (``core/memory.py``). An update that changes the machine's size
starts it again with its whole reservation.
"""

from __future__ import annotations

import asyncio
import logging

from bodega.model.errors import BadRequest, PreconditionFailed
from bodega.model.machine_answers import MemoryAnswer, ReclaimMemoryAnswer
from bodega.model.states import MachineState
from bodega.worker.core.memory import check_limit, check_reclaim, memory_answer
from bodega.worker.core.records import MachineRow
from bodega.worker.drivers.base import DriverError, MemoryBusy, MemoryControl
from bodega.worker.ops.machines import MachineService
from bodega.worker.store import leases, queries

log = logging.getLogger("bodega.worker.memory")
MIB = 1024 * 1024


class MachineMemory:
    def __init__(self, machines: MachineService) -> None:
        self.machines = machines
        self.store = machines.store
        self.driver = machines.driver

    def _control(self) -> MemoryControl:
        control = self.driver.capabilities.memory
        if control is None:
            raise BadRequest(f"unimplemented: the {self.driver.name} driver cannot limit a "
                             "machine's memory (it runs machines without memory cgroups)",
                             status="unimplemented")
        return control

    def _usage(self, row: MachineRow, control: MemoryControl | None) -> int | None:
        """What the machine's run uses now; None when it has no run to measure."""
        if control is None or row.state != MachineState.STARTED or row.handle is None:
            return None
        use = control.use(row.id)
        return None if use is None else use.usage_bytes

    def get(self, machine_id: str) -> MemoryAnswer:
        row = self.machines.get(machine_id)
        return memory_answer(row, self._usage(row, self.driver.capabilities.memory))

    async def set_limit(self, machine_id: str, limit_mb: int | None,
                        nonce: str | None) -> MemoryAnswer:
        control = self._control()
        lock = await self.machines.locks.acquire(machine_id)
        try:
            with self.store.tx() as conn:
                leases.check(conn, machine_id, nonce, self.store.clock())
            row = self.machines.get(machine_id)
            usage = self._usage(row, control)
            limit = check_limit(row, limit_mb, usage)
            if usage is not None:
                try:
                    await asyncio.to_thread(control.set_limit, machine_id, limit)
                except (MemoryBusy, DriverError) as exc:
                    raise PreconditionFailed(f"failed_precondition: {exc}") from None
            with self.store.tx() as conn:
                queries.update_machine(conn, machine_id, self.store.clock(),
                                       memory_limit_mb=None if limit == row.memory_mb else limit)
                self.store.append(conn, op_id="action", resource_id=machine_id, fsm="action",
                                  step="set_memory_limit", payload={"limit_mb": limit})
            log.info("%s: memory limit %d MB (reserved %d MB)", machine_id, limit,
                     row.memory_mb)
            row = self.machines.get(machine_id)
            return memory_answer(row, self._usage(row, control))
        finally:
            lock.release()

    async def reclaim(self, machine_id: str, amount_mb: int | None) -> ReclaimMemoryAnswer:
        control = self._control()
        lock = await self.machines.locks.acquire(machine_id)
        try:
            row = self.machines.get(machine_id)
            amount = check_reclaim(row, amount_mb)
            try:
                reclaimed = await asyncio.to_thread(control.reclaim, machine_id, amount)
            except DriverError as exc:
                raise PreconditionFailed(f"failed_precondition: {exc}") from None
            with self.store.tx() as conn:
                self.store.append(conn, op_id="action", resource_id=machine_id, fsm="action",
                                  step="reclaim_memory",
                                  payload={"asked_mb": amount, "reclaimed_bytes": reclaimed})
            return ReclaimMemoryAnswer(actual_mb=reclaimed // MIB)
        finally:
            lock.release()
