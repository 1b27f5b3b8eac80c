"""The worker's end of a VM's console against an init played over a real Unix socket: it
starts once the init marks the start, ends with the code the init marks, tells resizes
and hang-ups on the signal line, and never loses the end for a reader that lags."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bodega.model.console import TerminalSize
from bodega.worker.drivers.base import NoAnswer, TaskGone
from bodega.worker.drivers.vm import guest_console
from bodega.worker.drivers.vm.core.console_marks import ConsoleRequest
from bodega.worker.drivers.vm.guest_console import LOST, VmConsole
from tests.integration.worker.test_vm_exec_line import exec_line

Init = Callable[[asyncio.StreamReader, asyncio.StreamWriter, str], Awaitable[None]]
SIZE = TerminalSize(rows=24, cols=80)


class Told:
    """The offers a console makes on the signal line."""

    def __init__(self) -> None:
        self.offers: list[tuple[str, tuple[str, ...]]] = []
        self.changed = asyncio.Event()

    async def __call__(self, verb: str, words: tuple[str, ...]) -> bool:
        self.offers.append((verb, words))
        self.changed.set()
        return True

    async def wait_for(self, verb: str) -> None:
        while not any(v == verb for v, _ in self.offers):
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)


@asynccontextmanager
async def console_line(path: Path, init: Init) -> AsyncIterator[None]:
    """``init`` on the other end of each connection to ``path``, given the console's id
    from the start line it reads, as the guest's init reads it (the exec line's stand-in
    socket, ``test_vm_exec_line.exec_line``)."""
    async def started(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert await reader.readline() == b"\n"
        magic, console_id, rows, cols, _ = (await reader.readline()).split(b" ")
        assert (magic, rows, cols) == (b"bodega-console", b"24", b"80")
        await init(reader, writer, console_id.decode())

    async with exec_line(path, started):
        yield

def marks(console_id: str) -> tuple[bytes, Callable[[int], bytes]]:
    return (f"\x1b]bodega-start;{console_id}\x07".encode(),
            lambda code: f"\x1b]bodega-exit;{console_id};{code}\x07".encode())


async def read_all(console: VmConsole) -> bytes:
    out = b""
    while data := await console.read():
        out += data
    return out


async def test_a_console_runs_between_the_inits_marks_and_ends_with_its_code(
        tmp_path: Path) -> None:
    typed = asyncio.get_running_loop().create_future()

    async def init(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   console_id: str) -> None:
        start, end = marks(console_id)
        writer.write(b"echoed before raw\r\n" + start + b"$ ")
        await writer.drain()
        typed.set_result(await reader.readexactly(5))
        writer.write(b"exit 3\r\n" + end(3) + b"after the end")
        await writer.drain()

    told = Told()
    line = tmp_path / "m.tty"
    async with console_line(line, init):
        console = await VmConsole.open("m", line, ConsoleRequest(["sh"], SIZE), told)
        try:
            assert await console.read() == b"$ "
            console.resize(TerminalSize(rows=33, cols=101))
            await told.wait_for("resize")
            await console.write(b"exit\r")
            assert await typed == b"exit\r"
            assert await console.exit_code() == 3
            assert await read_all(console) == b"exit 3\r\n"
        finally:
            await console.close()
    assert told.offers == [("resize", (console.request.console_id, "33", "101"))], \
        "no hang-up for a console whose program ended"


async def test_an_init_not_listening_or_a_vm_gone_is_a_clear_error(tmp_path: Path) -> None:
    line = tmp_path / "m.tty"
    with pytest.raises(NoAnswer, match=r"^machine m's VM is not taking consoles: its init "
                                       r"did not answer in 0.3 s \(still booting\?\)$"):
        await VmConsole.open("m", line, ConsoleRequest([], SIZE), Told(), boot_wait=0.3)

    async def booting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      console_id: str) -> None:
        writer.write(b"\nbodega-console echoed, not started\r\n")

    told = Told()
    request = ConsoleRequest([], SIZE)
    async with console_line(line, booting):
        with pytest.raises(NoAnswer, match=r"did not answer in 0\.3 s"):
            await VmConsole.open("m", line, request, told, boot_wait=0.3)
    # Never to start, should the init take it late; and whatever holds the terminal (a
    # console a worker left) hung up.
    assert told.offers == [("hangup", (request.console_id, "all"))]

    async def gone(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   console_id: str) -> None:
        writer.close()

    async with console_line(line, gone):
        with pytest.raises(TaskGone, match="machine m's VM ended before its console started"):
            await VmConsole.open("m", line, ConsoleRequest([], SIZE), Told())


async def test_a_console_let_go_first_is_hung_up_and_its_end_waited_for(
        tmp_path: Path) -> None:
    told = Told()

    async def init(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   console_id: str) -> None:
        start, end = marks(console_id)
        writer.write(start + b"$ sleep 99\r\n")
        await writer.drain()
        await told.wait_for("hangup")
        await asyncio.sleep(0.2)  # the session takes its SIGHUP
        writer.write(end(129))
        await writer.drain()

    line = tmp_path / "m.tty"
    async with console_line(line, init):
        console = await VmConsole.open("m", line, ConsoleRequest([], SIZE), told)
        assert await console.read() == b"$ sleep 99\r\n"
        await console.close()
        assert console.ended.done(), "closed once the program ended"
        assert await console.exit_code() == 129
    assert told.offers == [("hangup", (console.request.console_id,))]

    async def vm_ends(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      console_id: str) -> None:
        writer.write(marks(console_id)[0] + b"last words")
        await writer.drain()
        writer.close()

    async with console_line(line, vm_ends):
        console = await VmConsole.open("m", line, ConsoleRequest([], SIZE), Told())
        assert await console.exit_code() == LOST
        assert await read_all(console) == b"last words"
        await console.close()


async def test_output_past_the_backlog_is_dropped_but_never_the_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guest_console, "BACKLOG", 1000)

    async def init(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   console_id: str) -> None:
        start, end = marks(console_id)
        writer.write(start)
        for _ in range(50):
            writer.write(b"x" * 999 + b"\n")
            await writer.drain()
        writer.write(end(0))
        await writer.drain()

    line = tmp_path / "m.tty"
    async with console_line(line, init):
        console = await VmConsole.open("m", line, ConsoleRequest([], SIZE), Told())
        assert await console.exit_code() == 0  # nothing read meanwhile
        assert await read_all(console) == b"x" * 999 + b"\n"
        assert console.dropped == 49 * 1000
        await console.close()
