"""A console in a vm machine: the worker's end of the guest's terminal.

A VM's program is behind its own kernel, so its console runs on a terminal of that
kernel's: a virtio console (the guest's ``/dev/hvc0``; ``qemu.CONSOLE_PORT``), which the
init reads start lines from and runs each console's program on (``init.sh``). qemu
serves its other end on a Unix socket in ``qemu.CONTROL_DIR``; what goes over it is in
``core/console_marks.py``. The guest's terminal does what a terminal does: it echoes,
edits lines, makes Ctrl-C a SIGINT for the program in the foreground, and a resize
(which comes on the signal line, as does a hang-up) a SIGWINCH.

qemu serves one connection at a time, and the init one console at a time: a VM has one
console open at once (a second is ``Busy``), and a console is only let go once its
program has ended, hung up when the worker closes it first, so the next one's start line
is never typed into an earlier program. One a worker left running (it was restarted) is
found when the next start goes unmarked: that one is refused (``NoAnswer``, try again),
and its hang-up ends whatever holds the terminal.

The socket is read on at once, always, whatever the WebSocket takes: qemu drops what a
virtio console writes when its socket is full (it cannot hold the guest back), and the
end mark must not be what it drops. What is not taken yet is held up to ``BACKLOG``
bytes; past that the output is dropped here instead, as a serial console's would be,
until the WebSocket has taken what was held.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from bodega.model.console import TerminalSize
from bodega.runtime.waits import within
from bodega.worker.drivers.base import DriverError, NoAnswer, TaskGone
from bodega.worker.drivers.vm.core.console_marks import ConsoleRequest, Marks

log = logging.getLogger("bodega.worker.vm")

BOOT_WAIT = 15.0  # seconds a console waits for the init to start it: the VM may be booting
CONNECT_EVERY = 0.1  # between tries to reach a socket qemu has not made yet
HANGUP_GRACE = 8.0  # seconds a hung-up console has to end: the init kills it after 5
BACKLOG = 1 << 20  # bytes of output held for a WebSocket that has not taken them yet
CHUNK = 64 * 1024
LOST = 255  # the exit code when the VM ended before the console's program did (as ssh's)

# An offer on the VM's signal line: its verb and its words (``signal_line.Offer``).
Tell = Callable[[str, tuple[str, ...]], Awaitable[bool]]


class VmConsole:
    """One console's program on a VM's terminal; ``close`` hangs it up and waits for its
    end. The interface is ``Terminal``'s (``worker/ops/terminal.py``)."""

    def __init__(self, machine_id: str, request: ConsoleRequest,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 marks: Marks, tell: Tell) -> None:
        self.machine_id = machine_id
        self.request = request
        self.reader = reader
        self.writer = writer
        self.marks = marks
        self.tell = tell
        self.held = bytearray()
        self.dropped = 0
        self.changed = asyncio.Event()
        self.ended: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.closed = False
        self.size: TerminalSize | None = None  # the latest resize not yet told the init
        self.resizing: asyncio.Task[None] | None = None
        self.pump = asyncio.ensure_future(self._pump())

    @classmethod
    async def open(cls, machine_id: str, line: Path, request: ConsoleRequest, tell: Tell,
                   boot_wait: float = BOOT_WAIT) -> VmConsole:
        """Start ``request``'s program on the VM whose console is the socket ``line``:
        once the init marked its start. NoAnswer if it did not in ``boot_wait`` seconds,
        TaskGone if the VM ended."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + boot_wait
        not_listening = NoAnswer(f"machine {machine_id}'s VM is not taking consoles: its "
                                 f"init did not answer in {boot_wait:g} s (still booting?)")
        reader, writer = await _connect(line, deadline, not_listening)
        marks = Marks(request)
        try:
            writer.write(request.start_line())
            await writer.drain()
            first = bytearray()
            while not marks.started:
                data = await within(reader.read(CHUNK), max(0.0, deadline - loop.time()))
                if not data:
                    raise TaskGone(f"machine {machine_id}'s VM ended before its console "
                                   "started")
                first += marks.feed(data)
        except TimeoutError:
            await _close(writer)
            # Never to start, should the init take it yet; and what holds the terminal,
            # if anything does, is no one's (its worker went away before it ended).
            await tell("hangup", request.hangup_words(anyone=True))
            raise not_listening from None
        except OSError as exc:
            await _close(writer)
            raise DriverError(f"machine {machine_id}'s console: {exc}") from exc
        except BaseException:
            await _close(writer)
            raise
        console = cls(machine_id, request, reader, writer, marks, tell)
        console._hold(bytes(first))
        return console

    def _hold(self, data: bytes) -> None:
        room = max(0, BACKLOG - len(self.held))
        self.held += data[:room]
        self.dropped += len(data) - min(len(data), room)
        self.changed.set()

    async def _pump(self) -> None:
        """Read the socket to the end mark (or the VM's end), holding the output."""
        code = LOST
        try:
            while self.marks.code is None:
                data = await self.reader.read(CHUNK)
                if not data:
                    break
                self._hold(self.marks.feed(data))
            if self.marks.code is not None:
                code = self.marks.code
        except OSError as exc:
            log.info("%s: console line: %s", self.machine_id, exc)
        finally:
            if self.dropped:
                log.info("%s: %d bytes of console output dropped (not taken in time)",
                         self.machine_id, self.dropped)
            if not self.ended.done():
                self.ended.set_result(code)
            self.changed.set()

    async def read(self) -> bytes:
        """What the program printed next; b"" once it has ended and all was read."""
        while True:
            if self.held:
                data = bytes(self.held[:CHUNK])
                del self.held[:CHUNK]
                return data
            if self.ended.done() or self.closed:
                return b""
            self.changed.clear()
            await self.changed.wait()

    async def write(self, data: bytes) -> None:
        """Type ``data``; nothing once the program has ended."""
        if self.ended.done() or self.closed:
            return
        try:
            self.writer.write(data)
            await self.writer.drain()
        except OSError:
            pass

    def resize(self, size: TerminalSize) -> None:
        """Tell the init the terminal's new size, on the signal line, in order: a resize
        that comes while one is being told is told next, the latest only."""
        if self.closed:
            return
        self.size = size
        if self.resizing is None or self.resizing.done():
            self.resizing = asyncio.ensure_future(self._resize())

    async def _resize(self) -> None:
        while self.size is not None and not self.ended.done():
            size, self.size = self.size, None
            await self.tell("resize", self.request.resize_words(size))

    async def exit_code(self) -> int:
        """Wait for the program to end: its exit code, as a shell says it (``LOST`` when
        the VM ended first)."""
        return await asyncio.shield(self.ended)

    async def close(self) -> None:
        """Hang the console up unless its program has ended, wait for its end (the init
        kills what SIGHUP leaves), then let go of the socket."""
        if self.closed:
            return
        self.closed = True
        self.changed.set()
        try:
            if not self.ended.done():
                await self.tell("hangup", self.request.hangup_words())
                with contextlib.suppress(TimeoutError):
                    await within(asyncio.shield(self.ended), HANGUP_GRACE)
                if not self.ended.done():
                    log.warning("%s: the console's program did not end %g s after its "
                                "hang-up", self.machine_id, HANGUP_GRACE)
        finally:
            for task in (self.pump, self.resizing):
                if task is not None:
                    task.cancel()
            if not self.ended.done():
                self.ended.set_result(LOST)
            self.writer.close()


async def _connect(line: Path, deadline: float, not_listening: NoAnswer,
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to qemu's socket of the console, which a qemu just started may not have
    made yet."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            return await asyncio.open_unix_connection(str(line))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            if loop.time() >= deadline:
                raise not_listening from exc
        await asyncio.sleep(CONNECT_EVERY)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
