"""A console in a vm machine as its bytes go on the guest's terminal; pure.

The init runs a console on a virtio console, the guest's ``/dev/hvc0`` (``init.sh``),
whose other end is a Unix socket of qemu's on the host. One stream carries everything,
so the worker's words are a line it types before the program runs, and the init's are
marks it prints around the program's output, each naming the console's id:

    worker:  \\nbodega-console ID ROWS COLS REQUEST\\n      (the terminal raw, unechoed)
    init:    ESC ] bodega-start;ID BEL                   then the program's output
    init:    ESC ] bodega-exit;ID;CODE BEL               once it has ended

REQUEST is base64 of ``set -- <argv as quoted shell literals>``, as an exec's is
(``guest_exec.py``): nothing of the argv is parsed by the guest's shell. The line starts
on a line of its own, whatever an earlier console left typed. A resize and a hang-up go
on the signal line as offers (``signal_line.py``: ``resize ID CONSOLE ROWS COLS``,
``hangup ID CONSOLE``), which the init checks against the console it runs: qemu gives a
virtio console no resize, and a host that lets go of the socket hangs nothing up in the
guest. ``Marks`` reads the stream: nothing before the start mark (what
a terminal not yet raw echoed, an earlier console's last words), the output after it,
the code in the end mark, nothing after that.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from bodega.model.console import TerminalSize

CODE = re.compile(rb"(\d{1,3})\x07")  # an end mark's code and its closing BEL
PARTIAL_CODE = re.compile(rb"\d{0,3}")


@dataclass(frozen=True)
class ConsoleRequest:
    """One console, as the init is told it."""

    argv: Sequence[str]  # empty: the image's shell
    size: TerminalSize
    console_id: str = field(default_factory=lambda: secrets.token_hex(8))

    def start_line(self) -> bytes:
        script = "set -- " + " ".join(shlex.quote(arg) for arg in self.argv) + "\n"
        return (f"\nbodega-console {self.console_id} {self.size.rows} {self.size.cols} "
                f"{base64.b64encode(script.encode()).decode()}\n").encode()

    def resize_words(self, size: TerminalSize) -> tuple[str, ...]:
        """A resize's words on the signal line, after its verb and offer's id."""
        return (self.console_id, str(size.rows), str(size.cols))

    def hangup_words(self, *, anyone: bool = False) -> tuple[str, ...]:
        """A hang-up's words: this console's, which the init will then never start if it
        has not yet; ``anyone``: whatever console runs too (one whose worker went away,
        which took this one's start line)."""
        return (self.console_id, "all") if anyone else (self.console_id,)

    def start_mark(self) -> bytes:
        return f"\x1b]bodega-start;{self.console_id}\x07".encode()

    def end_mark(self) -> bytes:
        """The end mark up to its code."""
        return f"\x1b]bodega-exit;{self.console_id};".encode()


def held_back(data: bytes, mark: bytes) -> int:
    """How many bytes at the end of ``data`` may be the start of ``mark``."""
    for length in range(min(len(mark) - 1, len(data)), 0, -1):
        if data.endswith(mark[:length]):
            return length
    return 0


class Marks:
    """The program's output and exit code, read from the console's stream as it comes."""

    def __init__(self, request: ConsoleRequest) -> None:
        self.start = request.start_mark()
        self.end = request.end_mark()
        self.started = False
        self.code: int | None = None  # the program's, once its end mark has come
        self.pending = b""  # what may be the start of a mark, kept for the next bytes

    def feed(self, data: bytes) -> bytes:
        """The output ``data`` holds, with what came before it; b"" before the start mark
        and after the end mark."""
        if self.code is not None:
            return b""
        data = self.pending + data
        self.pending = b""
        if not self.started:
            found = data.find(self.start)
            if found < 0:
                self.pending = data[len(data) - held_back(data, self.start):]
                return b""
            self.started = True
            data = data[found + len(self.start):]
        found = data.find(self.end)
        if found < 0:
            keep = held_back(data, self.end)
            self.pending = data[len(data) - keep:]
            return data[:len(data) - keep]
        tail = data[found + len(self.end):]
        ended = CODE.match(tail)
        if ended is not None and int(ended.group(1)) <= 255:
            self.code = int(ended.group(1))
            return data[:found]
        if PARTIAL_CODE.fullmatch(tail):  # the mark's code is still on its way
            self.pending = data[found:]
            return data[:found]
        # Not a mark after all (the program printed one's like): output, read on past it.
        return data[:found + 1] + self.feed(data[found + 1:])
