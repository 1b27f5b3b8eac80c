"""Wake-ups for callers waiting on a machine's state (the ``/wait`` endpoint)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable

from bodega.runtime.waits import within


class StateWatch:
    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)

    def notify(self, machine_id: str) -> None:
        for future in self._waiters.pop(machine_id, set()):
            if not future.done():
                future.set_result(None)

    async def wait_until(
        self, machine_id: str, condition: Callable[[], bool], timeout: float
    ) -> bool:
        """True once ``condition()`` holds (checked after every change), False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not condition():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            future: asyncio.Future[None] = loop.create_future()
            self._waiters[machine_id].add(future)
            try:
                await within(future, remaining)
            except TimeoutError:
                pass
            finally:
                waiters = self._waiters.get(machine_id)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[machine_id]
        return True
