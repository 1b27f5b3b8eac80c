"""A console's program on a pseudo-terminal of the worker's (``bodega ssh console``).

The driver says how to start the program where the machine's program runs
(``TaskControl.console``: the process driver's entry, the runtime's ``exec``); the
terminal is made here, once for every driver. The slave end is the program's stdin,
stdout and stderr and its controlling terminal: it starts through util-linux
``setsid --ctty``, in a session of its own, so the terminal's line discipline does
what a terminal does (Ctrl-C becomes SIGINT for the program in the foreground, a
resize SIGWINCH). The worker keeps the master: what is written to it is typed, what
is read from it was printed. Closing the master hangs the terminal up, and the
session gets SIGHUP; one still there ``HANGUP_GRACE`` seconds later is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import signal as signals
import struct
import termios
from pathlib import Path

from bodega.model.console import TerminalSize, exit_code
from bodega.runtime.waits import within
from bodega.worker.drivers.base import ConsoleCommand

CHUNK = 64 * 1024  # the most read from the terminal at once
HANGUP_GRACE = 5.0  # seconds a hung-up session has to end before it is killed
SETSID = shutil.which("setsid") or "/usr/bin/setsid"


def set_size(fd: int, size: TerminalSize) -> None:
    """Tell the terminal of ``fd`` its size (the kernel sends the foreground SIGWINCH)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size.rows, size.cols, 0, 0))


def resize_own(pid_file: Path, size: TerminalSize) -> None:
    """Resize the terminal a runtime made for the program whose pid ``pid_file`` holds (its
    stdin): crun copies bytes between it and the worker's, but no resize. Nothing is done
    while the pid is not written yet, or when the program has no terminal there."""
    try:
        pid = int(pid_file.read_text().strip())
        fd = os.open(f"/proc/{pid}/fd/0", os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return
    try:
        if os.isatty(fd):
            set_size(fd, size)
    except OSError:
        pass
    finally:
        os.close(fd)


class Terminal:
    """A program started on a pseudo-terminal; ``close`` hangs it up and reaps it."""

    def __init__(self, master: int, process: asyncio.subprocess.Process,
                 pid_file: Path | None = None) -> None:
        self.master = master
        self.process = process
        self.pid_file = pid_file  # the program's, on a terminal its runtime made
        self.closed = False

    @classmethod
    async def start(cls, command: ConsoleCommand, size: TerminalSize) -> Terminal:
        """Start ``command`` on a new terminal of ``size``; OSError if it could not be."""
        master, slave = os.openpty()
        try:
            set_size(master, size)
            # Not a process group leader (no new session here), so setsid makes its session
            # without a fork, and the program it execs is the process waited for.
            process = await asyncio.create_subprocess_exec(
                SETSID, "--ctty", *command.argv, stdin=slave, stdout=slave, stderr=slave,
                env=command.env, cwd=command.cwd)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        return cls(master, process, command.pid_file)

    async def _ready(self, writing: bool) -> None:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        (loop.add_writer if writing else loop.add_reader)(self.master, wake)
        try:
            await ready
        finally:
            (loop.remove_writer if writing else loop.remove_reader)(self.master)

    async def read(self) -> bytes:
        """What the program printed next; b"" once nothing holds the terminal any more."""
        while not self.closed:
            try:
                return os.read(self.master, CHUNK)
            except BlockingIOError:
                await self._ready(writing=False)
            except OSError:  # EIO: every holder of the slave end has closed it
                return b""
        return b""

    async def write(self, data: bytes) -> None:
        """Type ``data`` (it waits while the terminal's input is full)."""
        view = memoryview(data)
        while view and not self.closed:
            try:
                view = view[os.write(self.master, view):]
            except BlockingIOError:
                await self._ready(writing=True)
            except OSError:  # hung up: the program is gone
                return

    def resize(self, size: TerminalSize) -> None:
        if self.closed:
            return
        set_size(self.master, size)
        if self.pid_file is not None:
            resize_own(self.pid_file, size)

    async def exit_code(self) -> int:
        """Wait for the program to end: its exit code, as a shell says it."""
        return exit_code(await self.process.wait())

    async def close(self) -> None:
        """Hang the terminal up (SIGHUP for its session), then reap the program; killed
        with its process group if it has not ended ``HANGUP_GRACE`` seconds later."""
        if not self.closed:
            self.closed = True
            loop = asyncio.get_running_loop()
            loop.remove_reader(self.master)
            loop.remove_writer(self.master)
            os.close(self.master)
        if self.process.returncode is None:
            try:
                await within(asyncio.shield(self.process.wait()), HANGUP_GRACE)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, signals.SIGKILL)
                await self.process.wait()
