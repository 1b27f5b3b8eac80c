"""The null driver: machines with no process, for placement and scale tests.

A null task "runs" from start until it is stopped or destroyed; nothing is
spawned, so one host can hold thousands. A worker restart re-adopts every
null task as still running, which is what a real task would look like.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal as signals
import time
from pathlib import Path

from bodega.model.machine import ExitStatus
from bodega.worker.drivers.base import (
    Capabilities,
    ConsoleCommand,
    ExecResult,
    ProcessInfo,
    TaskGone,
    TaskHandle,
    TaskSpec,
)


class NullDriver:
    name = "null"

    def __init__(self) -> None:
        self.capabilities = Capabilities(control=self, prepares=False)
        self._exits: dict[tuple[str, int], asyncio.Future[ExitStatus]] = {}

    def _future(self, handle: TaskHandle) -> asyncio.Future[ExitStatus]:
        key = (handle.instance_id, handle.start_seq)
        if key not in self._exits:
            self._exits[key] = asyncio.get_running_loop().create_future()
        return self._exits[key]

    async def prepare(self, spec: TaskSpec) -> None:
        return None

    async def start(self, spec: TaskSpec) -> TaskHandle:
        handle = TaskHandle(
            driver=self.name, machine_id=spec.machine_id, instance_id=spec.instance_id,
            start_seq=spec.start_seq, started_at=time.time(),
        )
        self._future(handle)
        return handle

    async def recover(self, handle: TaskHandle) -> bool:
        return not self._future(handle).done()

    async def wait(self, handle: TaskHandle) -> ExitStatus:
        return await asyncio.shield(self._future(handle))

    def _end(self, handle: TaskHandle, sig: int) -> None:
        future = self._future(handle)
        if not future.done():
            future.set_result(ExitStatus(exit_code=128 + sig, signal=sig, exited_at=time.time()))

    async def stop(self, handle: TaskHandle, signal: int, timeout: float) -> None:
        self._end(handle, signal)

    async def signal(self, handle: TaskHandle, signal: int) -> None:
        if signal in (signals.SIGTERM, signals.SIGINT, signals.SIGKILL, signals.SIGQUIT):
            self._end(handle, signal)

    async def inspect(self, handle: TaskHandle) -> bool:
        return not self._future(handle).done()

    async def exec(
        self, handle: TaskHandle, spec: TaskSpec, argv: list[str], timeout: float,
        stdin: bytes | None,
    ) -> ExecResult:
        return ExecResult(exit_code=0, stdout="", stderr="")

    def console(self, handle: TaskHandle, spec: TaskSpec, argv: list[str]
                ) -> contextlib.AbstractAsyncContextManager[ConsoleCommand]:
        return _NoConsole(handle.machine_id)

    async def ps(self, handle: TaskHandle) -> list[ProcessInfo]:
        return []

    async def destroy(self, machine_id: str, machine_dir: Path) -> None:
        for (instance_id, seq), future in list(self._exits.items()):
            if not future.done():
                future.set_result(ExitStatus(exit_code=137, signal=9, exited_at=time.time()))
            del self._exits[(instance_id, seq)]


class _NoConsole(contextlib.AbstractAsyncContextManager[ConsoleCommand]):
    """A null machine runs no program: there is nothing to open a console in."""

    def __init__(self, machine_id: str) -> None:
        self.machine_id = machine_id

    async def __aenter__(self) -> ConsoleCommand:
        raise TaskGone(f"machine {self.machine_id} runs no program (the null driver): "
                       "there is nothing to open a console in")

    async def __aexit__(self, *exc: object) -> None:
        return None
