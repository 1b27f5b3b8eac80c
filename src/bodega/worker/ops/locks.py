"""One operation at a time per machine: later callers queue, for a bounded time."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from bodega.model.errors import Conflict

BUSY_WAIT = 30.0


class MachineLocks:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def acquire(self, machine_id: str, timeout: float = BUSY_WAIT) -> asyncio.Lock:
        lock = self._locks[machine_id]
        if not lock.locked():  # the common case: no timer, no task
            await lock.acquire()
            return lock
        try:
            async with asyncio.timeout(timeout):
                await lock.acquire()
        except TimeoutError:
            raise Conflict(
                f"failed_precondition: machine {machine_id} is busy with another operation; "
                "retry shortly"
            ) from None
        return lock

    def busy(self, machine_id: str) -> bool:
        """An operation holds the machine now (a caller would queue)."""
        lock = self._locks.get(machine_id)
        return lock is not None and lock.locked()

    def forget(self, machine_id: str) -> None:
        lock = self._locks.get(machine_id)
        if lock is not None and not lock.locked():
            del self._locks[machine_id]
