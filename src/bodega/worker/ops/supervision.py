"""Watches every running machine's process and reports how it ended.

One task per running machine waits on the driver; when the process ends the
task calls back into the machine service, which decides (under the machine's
lock) whether this was an exit it asked for or one to apply the restart
policy to. Watching a handle that is already watched does nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bodega.model.machine import ExitStatus
from bodega.worker.drivers.base import Driver, TaskHandle

log = logging.getLogger("bodega.worker.supervision")

ExitCallback = Callable[[str, TaskHandle, ExitStatus], Awaitable[None]]


class Supervision:
    def __init__(self, driver: Driver, on_exit: ExitCallback) -> None:
        self.driver = driver
        self.on_exit = on_exit
        self._watching: dict[str, tuple[tuple[str, int], asyncio.Task[None]]] = {}
        self.exiting: set[asyncio.Task[None]] = set()

    def watch(self, machine_id: str, handle: TaskHandle) -> None:
        key = (handle.instance_id, handle.start_seq)
        current = self._watching.get(machine_id)
        if current is not None and current[0] == key and not current[1].done():
            return
        task = asyncio.create_task(self._wait(machine_id, handle))
        self._watching[machine_id] = (key, task)

    async def _wait(self, machine_id: str, handle: TaskHandle) -> None:
        try:
            status = await self.driver.wait(handle)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: waiting for the process failed", machine_id)
            return
        current = self._watching.get(machine_id)
        if current is not None and current[0] == (handle.instance_id, handle.start_seq):
            del self._watching[machine_id]
        task = asyncio.current_task()
        if task is not None:
            self.exiting.add(task)
            task.add_done_callback(self.exiting.discard)
        await self.on_exit(machine_id, handle, status)

    def watched(self) -> set[str]:
        return {mid for mid, (_key, task) in self._watching.items() if not task.done()}

    async def close(self) -> None:
        tasks = [task for _key, task in self._watching.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._watching.clear()
