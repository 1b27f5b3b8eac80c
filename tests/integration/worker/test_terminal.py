"""A console's program on a real pseudo-terminal of the worker's (``worker/ops/terminal.py``):
it starts at the size asked, on a terminal that is its controlling one (in a session of
its own), turns typed keys into what a terminal makes of them (Ctrl-C: SIGINT), says its
exit code as a shell does, and is hung up (SIGHUP) and reaped when the terminal closes."""

from __future__ import annotations

import os

from bodega.model.console import TerminalSize
from bodega.runtime.waits import within
from bodega.worker.drivers.base import ConsoleCommand
from bodega.worker.ops.terminal import Terminal

WAIT = 30.0


async def output_until(terminal: Terminal, marker: bytes) -> bytes:
    seen = b""
    while marker not in seen:
        chunk = await within(terminal.read(), WAIT)
        if not chunk:
            code = await within(terminal.exit_code(), WAIT)
            raise AssertionError(f"the terminal ended before {marker!r}: {seen!r}, "
                                 f"its program's exit code {code}")
        seen += chunk
    return seen


async def test_the_program_has_the_terminal_at_its_size_and_as_its_own() -> None:
    script = ('stty size; [ "$(ps -o sid= -p $$)" -eq $$ ] && echo own-session; '
              'tty >/dev/null && echo on-a-tty; exit 7')
    terminal = await Terminal.start(ConsoleCommand(["sh", "-c", script]),
                                    TerminalSize(rows=33, cols=101))
    try:
        seen = await output_until(terminal, b"on-a-tty")
        assert b"33 101" in seen
        assert b"own-session" in seen
        assert await within(terminal.exit_code(), WAIT) == 7
    finally:
        await terminal.close()


async def test_ctrl_c_interrupts_the_foreground_and_a_resize_is_seen() -> None:
    script = ("trap 'echo interrupted; exit 5' INT; echo ready; "
              "while :; do stty size; read line || true; done")
    terminal = await Terminal.start(ConsoleCommand(["sh", "-c", script]),
                                    TerminalSize(rows=24, cols=80))
    try:
        await output_until(terminal, b"24 80")
        terminal.resize(TerminalSize(rows=50, cols=132))
        await terminal.write(b"\n")
        await output_until(terminal, b"50 132")
        await terminal.write(b"\x03")
        await output_until(terminal, b"interrupted")
        assert await within(terminal.exit_code(), WAIT) == 5
    finally:
        await terminal.close()


async def test_closing_hangs_the_program_up_and_reaps_it() -> None:
    terminal = await Terminal.start(ConsoleCommand(["sh", "-c", "echo up; exec sleep 4321"]),
                                    TerminalSize(rows=24, cols=80))
    await output_until(terminal, b"up")
    pid = terminal.process.pid
    await within(terminal.close(), WAIT)
    assert terminal.process.returncode == -1  # SIGHUP
    assert not os.path.exists(f"/proc/{pid}")
    assert await terminal.read() == b""  # closed: nothing more, no error
    await terminal.close()  # twice is no harm
