"""A scriptable driver for unit tests of the worker's state machines.

Tests say what the next start does (``fail_next_start``), make a running task
exit with a chosen status (``exit``), and read back every call the worker made
(``calls``), with no processes and no sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bodega.model.machine import ExitStatus
from bodega.worker.drivers.base import (
    Capabilities,
    ConsoleCommand,
    DriverError,
    ExecResult,
    ProcessInfo,
    TaskGone,
    TaskHandle,
    TaskSpec,
)


@dataclass
class _Task:
    handle: TaskHandle
    spec: TaskSpec
    exited: asyncio.Future[ExitStatus]
    signals: list[int] = field(default_factory=list)


class FakeDriver:
    name = "fake"

    def __init__(self) -> None:
        self.capabilities = Capabilities(control=self)
        self.calls: list[tuple[str, str]] = []
        self.tasks: dict[tuple[str, int], _Task] = {}
        self.start_failures: list[str] = []
        self.ignore_signals = False
        self.exec_results: list[ExecResult] = []
        self._next_pid = 1000

    # -- scripting -------------------------------------------------------
    def fail_next_start(self, message: str = "exec format error") -> None:
        self.start_failures.append(message)

    def running(self, machine_id: str) -> list[_Task]:
        return [
            t for t in self.tasks.values()
            if t.handle.machine_id == machine_id and not t.exited.done()
        ]

    def exit(self, machine_id: str, status: ExitStatus) -> None:
        """Make the machine's running task end as ``status`` says."""
        for task in self.running(machine_id):
            task.exited.set_result(status)

    # -- the protocol ----------------------------------------------------
    async def prepare(self, spec: TaskSpec) -> None:
        self.calls.append(("prepare", spec.machine_id))

    async def start(self, spec: TaskSpec) -> TaskHandle:
        self.calls.append(("start", spec.machine_id))
        key = (spec.instance_id, spec.start_seq)
        if key in self.tasks:
            return self.tasks[key].handle
        if self.start_failures:
            raise DriverError(self.start_failures.pop(0))
        self._next_pid += 1
        handle = TaskHandle(
            driver=self.name, machine_id=spec.machine_id, instance_id=spec.instance_id,
            start_seq=spec.start_seq, pid=self._next_pid, started_at=time.time(),
        )
        future: asyncio.Future[ExitStatus] = asyncio.get_running_loop().create_future()
        self.tasks[key] = _Task(handle=handle, spec=spec, exited=future)
        return handle

    def _task(self, handle: TaskHandle) -> _Task | None:
        return self.tasks.get((handle.instance_id, handle.start_seq))

    async def recover(self, handle: TaskHandle) -> bool:
        self.calls.append(("recover", handle.machine_id))
        task = self._task(handle)
        return task is not None and not task.exited.done()

    async def wait(self, handle: TaskHandle) -> ExitStatus:
        task = self._task(handle)
        if task is None:  # a run of another driver, before a restart: killed with its host
            return ExitStatus(exit_code=None, signal=9, exited_at=time.time(), lost=True)
        return await asyncio.shield(task.exited)

    async def stop(self, handle: TaskHandle, signal: int, timeout: float) -> None:
        self.calls.append(("stop", handle.machine_id))
        task = self._task(handle)
        if task is None or task.exited.done():
            return
        task.signals.append(signal)
        if self.ignore_signals:
            task.signals.append(9)
            task.exited.set_result(ExitStatus(exit_code=137, signal=9, exited_at=time.time()))
        else:
            task.exited.set_result(
                ExitStatus(exit_code=128 + signal, signal=signal, exited_at=time.time())
            )

    async def signal(self, handle: TaskHandle, signal: int) -> None:
        self.calls.append(("signal", handle.machine_id))
        task = self._task(handle)
        if task is not None and not task.exited.done():
            task.signals.append(signal)

    async def inspect(self, handle: TaskHandle) -> bool:
        task = self._task(handle)
        return task is not None and not task.exited.done()

    async def exec(
        self, handle: TaskHandle, spec: TaskSpec, argv: list[str], timeout: float,
        stdin: bytes | None,
    ) -> ExecResult:
        self.calls.append(("exec", spec.machine_id))
        task = self._task(handle)
        if task is None or task.exited.done():
            raise TaskGone(f"machine {handle.machine_id}'s program is not running")
        if self.exec_results:
            return self.exec_results.pop(0)
        return ExecResult(exit_code=0, stdout=" ".join(argv), stderr="")

    @contextlib.asynccontextmanager
    async def console(self, handle: TaskHandle, spec: TaskSpec, argv: list[str]
                      ) -> AsyncIterator[ConsoleCommand]:
        """A fake task has no place to enter: its console runs on the host."""
        self.calls.append(("console", spec.machine_id))
        task = self._task(handle)
        if task is None or task.exited.done():
            raise TaskGone(f"machine {handle.machine_id}'s program is not running")
        yield ConsoleCommand(argv or ["sh"])

    async def ps(self, handle: TaskHandle) -> list[ProcessInfo]:
        task = self._task(handle)
        if task is None or task.exited.done() or task.handle.pid is None:
            return []
        return [ProcessInfo(pid=task.handle.pid, command=" ".join(task.spec.argv), cpu=0, rss=0,
                            stime=0, rtime=0, directory=str(task.spec.machine_dir))]

    async def destroy(self, machine_id: str, machine_dir: Path) -> None:
        self.calls.append(("destroy", machine_id))
        for task in self.running(machine_id):
            task.exited.set_result(ExitStatus(exit_code=137, signal=9, exited_at=time.time()))
