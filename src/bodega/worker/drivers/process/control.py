"""Reaching into a running process machine: signals, commands where its program runs, ps.

``ProcessControl`` is given what it uses, not its driver: the runs (to signal one and
to know it is alive) and the cgroups (to list a machine's processes, and to put an
exec in them). How an exec enters the machine is ``entry.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as signals
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from bodega.model.console import CONSOLE_TERM
from bodega.runtime.waits import within
from bodega.worker.drivers.base import (
    ConsoleCommand,
    ExecResult,
    GuestConsole,
    ProcessInfo,
    TaskGone,
    TaskHandle,
    TaskSpec,
)
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.entry import Entry, entry_argv, held_files
from bodega.worker.drivers.process.launch import ROOT_ENV
from bodega.worker.drivers.process.procfs import listen_sockets, proc_info, session_pids
from bodega.worker.drivers.process.runs import Runs

EXEC_OUTPUT_LIMIT = 1 << 20  # bytes of an exec's stdout or stderr kept
CONSOLE_SHELL = "sh"  # a console's program unless told one: the host's, in the machine


class ProcessControl:
    """The process driver's ``TaskControl`` capability."""

    def __init__(self, runs: Runs, cgroups: Cgroups | None) -> None:
        self.runs = runs
        self.cgroups = cgroups

    async def signal(self, handle: TaskHandle, signal: int) -> None:
        await self.runs.signal(handle, signal)

    async def exec(
        self, handle: TaskHandle, spec: TaskSpec, argv: list[str], timeout: float,
        stdin: bytes | None,
    ) -> ExecResult:
        """Run ``argv`` where the machine's program runs: entered from its wrapper, which
        is in all the program is in (namespaces, cgroups, directory) once set up, and
        started it as ``spec.user`` with ``spec.env``."""
        async with self._entered(handle, spec, spec.env, argv) as command:
            return await run_bounded(command.argv, stdin, timeout, env=command.env,
                                     cwd=command.cwd)

    def console(self, handle: TaskHandle, spec: TaskSpec, argv: list[str]
                ) -> AbstractAsyncContextManager[ConsoleCommand | GuestConsole]:
        """``argv`` (empty: the host's ``sh``) entered as an exec is, with a ``TERM``
        unless the machine sets one."""
        return self._entered(handle, spec, {"TERM": CONSOLE_TERM, **spec.env},
                             argv or [CONSOLE_SHELL])

    @contextlib.asynccontextmanager
    async def _entered(self, handle: TaskHandle, spec: TaskSpec, env: Mapping[str, str],
                       argv: list[str]) -> AsyncIterator[ConsoleCommand]:
        """The command entering the machine to run ``argv``; what it enters is held open
        until the way out, so the command must have started by then."""
        pid = handle.pid
        gone = TaskGone(f"machine {handle.machine_id}'s program is not running")
        if pid is None or not await self.runs.set_up(handle):
            raise gone
        with held_files(pid, env) as files:
            if not self.runs.alive(handle):
                raise gone  # what was opened may be a stranger's that took the pid since
            entry = Entry(
                files,
                cgroup_procs=(tuple(self.cgroups.holding(handle.machine_id, pid))
                              if self.cgroups is not None else ()),
                user=spec.user, memory_kib=None if self.cgroups else spec.memory_mb * 1024,
            )
            yield ConsoleCommand(entry_argv(entry, argv), env=dict(ROOT_ENV),
                                 cwd=Path(files.cwd))

    async def ps(self, handle: TaskHandle) -> list[ProcessInfo]:
        if handle.pid is None or not self.runs.alive(handle):
            return []
        if self.cgroups is not None:
            pids = self.cgroups.pids(handle.machine_id)
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


async def run_bounded(argv: list[str], stdin: bytes | None, timeout: float, *,
                      env: dict[str, str] | None = None, cwd: Path | None = None,
                      codes_over_128_are_signals: bool = False) -> ExecResult:
    """Run a command in a session of its own; past ``timeout`` the whole session is killed.

    A command that cannot be run exits 127 and one killed for its timeout 124, as
    with ``timeout(1)``. ``codes_over_128_are_signals`` reads 128+N as signal N, for
    a runner (``runc exec``) that reports its child's death that way.
    """
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        return ExecResult(exit_code=127, stdout="", stderr=f"exec: {exc}\n")
    talk = asyncio.ensure_future(_talk(process, stdin))
    try:
        out, err = await within(asyncio.shield(talk), timeout)
    except asyncio.CancelledError:  # the caller went away: so does its command
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signals.SIGKILL)
        raise
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signals.SIGKILL)
        out, err = await talk
        return ExecResult(exit_code=124, stdout=_text(out), stderr=_text(err) + "exec: timed out\n",
                          exit_signal=signals.SIGKILL)
    code = process.returncode or 0
    if code < 0:
        return ExecResult(exit_code=128 - code, stdout=_text(out), stderr=_text(err),
                          exit_signal=-code)
    signalled = code - 128 if codes_over_128_are_signals and code > 128 else None
    return ExecResult(exit_code=code, stdout=_text(out), stderr=_text(err),
                      exit_signal=signalled)


async def _talk(process: asyncio.subprocess.Process, stdin: bytes | None) -> tuple[bytes, bytes]:
    """Feed ``stdin``, read both outputs to their end, and reap the command."""
    assert process.stdout is not None
    assert process.stderr is not None
    out, err, _ = await asyncio.gather(process.stdout.read(), process.stderr.read(),
                                       _feed(process, stdin))
    await process.wait()
    return out, err


async def _feed(process: asyncio.subprocess.Process, data: bytes | None) -> None:
    """Write ``data`` to a command that may already have ended without reading it.

    ``communicate`` does not do for this: on uvloop, writing to a pipe whose
    reader has gone raises ``RuntimeError`` (the transport is closed), not
    ``BrokenPipeError``, and an ``echo`` is often gone before its stdin is fed.
    """
    if data is None or process.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, RuntimeError):
        process.stdin.write(data)
        await process.stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, RuntimeError):
        process.stdin.close()
