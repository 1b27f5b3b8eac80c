"""Reaching into a running process machine: signals, commands in its context, ps."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as signals
from typing import TYPE_CHECKING

from bodega.worker.drivers.base import ExecResult, ProcessInfo, TaskHandle, TaskSpec
from bodega.worker.drivers.process.procfs import listen_sockets, proc_info, session_pids

EXEC_OUTPUT_LIMIT = 1 << 20  # bytes of an exec's stdout or stderr kept

if TYPE_CHECKING:
    from bodega.worker.drivers.process.driver import ProcessDriver


class ProcessControl:
    """The process driver's ``TaskControl`` capability."""

    def __init__(self, driver: ProcessDriver) -> None:
        self.driver = driver

    async def signal(self, handle: TaskHandle, signal: int) -> None:
        await self.driver.signal(handle, signal)

    async def exec(
        self, spec: TaskSpec, argv: list[str], timeout: float, stdin: bytes | None
    ) -> ExecResult:
        prefix: list[str] = []
        if spec.netns is not None:
            prefix += ["nsenter", f"--net=/run/netns/{spec.netns}", "--"]
        if spec.user is not None:
            prefix += ["setpriv", f"--reuid={spec.user[0]}", f"--regid={spec.user[1]}",
                       "--clear-groups", "--"]
        try:
            process = await asyncio.create_subprocess_exec(
                *prefix, *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=spec.env, cwd=spec.machine_dir / "root",
                start_new_session=True,
            )
        except OSError as exc:
            return ExecResult(exit_code=127, stdout="", stderr=f"exec: {exc}\n")
        try:
            out, err = await asyncio.wait_for(process.communicate(stdin), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signals.SIGKILL)
            out, err = await process.communicate()
            return ExecResult(exit_code=124, stdout=_text(out),
                              stderr=_text(err) + "exec: timed out\n",
                              exit_signal=signals.SIGKILL)
        code = process.returncode or 0
        exit_signal = -code if code < 0 else None
        return ExecResult(exit_code=128 - code if code < 0 else code, stdout=_text(out),
                          stderr=_text(err), exit_signal=exit_signal)

    async def ps(self, handle: TaskHandle) -> list[ProcessInfo]:
        if handle.pid is None or not self.driver.alive(handle):
            return []
        if self.driver.cgroups is not None:
            pids = self.driver.cgroups.pids(handle.machine_id)
        else:
            pids = session_pids(handle.pid)
        infos = []
        for pid in pids:
            info = proc_info(pid)
            if info is not None:
                infos.append(
                    ProcessInfo(
                        pid=pid, command=info.command, cpu=info.cpu, rss=info.rss,
                        stime=info.stime, rtime=info.rtime, directory=info.directory,
                        listen_sockets=listen_sockets(pid),
                    )
                )
        return infos


def _text(data: bytes) -> str:
    return data[:EXEC_OUTPUT_LIMIT].decode(errors="replace")
