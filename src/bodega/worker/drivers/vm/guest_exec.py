"""exec into a vm machine: the worker's end of the init's exec line.

A VM's program is behind its own kernel, where no runtime of the host reaches; its
init (``init.sh``) runs execs for the worker, one at a time, on a virtio-serial port
(``bodega.exec``, a Unix socket in ``qemu.CONTROL_DIR`` on the host). Every frame is
one line and starts with its request's id, so a late answer of an earlier exec (one
whose worker gave up, or died) is never taken for this one's:

    worker:  ID hello                                  init:  ID ready
    worker:  ID run TIMEOUT CAP REQUEST STDIN           init:  ID out BASE64 ...
                                                               ID err BASE64 ...
                                                               ID end CODE TIMED_OUT

``hello`` first, so a command is only sent to an init that listens: a request written
to a VM still booting would wait in qemu's buffers and run after its worker gave up.
Between execs the init's loop sleeps (a virtio-serial port with no one on the host's
end reads as at its end at once: a loop on it would spin), so the worker wakes it by a
line on the signal line (``wake``), again each ``WAKE_EVERY`` until it is ready.
REQUEST is base64 of ``set -- <argv as quoted shell literals>``, which the init sources,
as it does the machine's config (``config.py``): nothing of the argv is parsed as shell.
STDIN is base64 or ``-``; the outputs come back base64, 76 characters a line, each cut
at CAP bytes in the guest. The guest enforces TIMEOUT; the worker waits that and a
grace for the answer to come through. The frames here are pure; ``GuestExec`` is the
I/O, one exec at a time per VM.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import re
import secrets
import shlex
import signal as signals
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bodega.runtime.waits import within
from bodega.worker.drivers.base import DriverError, ExecResult, NoAnswer, TaskGone
from bodega.worker.drivers.process.control import EXEC_OUTPUT_LIMIT

# An exec's stdin travels in one line the init's shell reads a byte at a time: slow under
# emulation past some kilobytes, so it is bounded (the API refuses more).
EXEC_STDIN_LIMIT = 64 << 10
# Both within the wire's EXEC_SLACK, so a broker relaying an exec hears the worker's error.
BOOT_WAIT = 15.0  # seconds an exec waits for the init to listen: the VM may be booting
ANSWER_GRACE = 10.0  # past the exec's timeout, for its answer to come through
CONNECT_EVERY = 0.1  # between tries to reach a socket qemu has not made yet
WAKE_EVERY = 1.0  # between wakes of an init not ready yet (a wake is lost while it boots)
FRAME_LIMIT = 1 << 16  # a frame is ~100 bytes; a longer line is not the init's
REQUEST_ID = re.compile(r"[0-9a-f]{16}")
TIMED_OUT = "exec: timed out\n"


@dataclass(frozen=True)
class ExecRequest:
    """One exec, as the init is sent it."""

    argv: Sequence[str]
    timeout: float
    stdin: bytes | None = None
    output_limit: int = EXEC_OUTPUT_LIMIT
    request_id: str = field(default_factory=lambda: secrets.token_hex(8))

    def hello(self) -> bytes:
        return f"{self.request_id} hello\n".encode()

    def run(self) -> bytes:
        if not self.argv:
            raise ValueError("an exec needs a command")
        script = "set -- " + " ".join(shlex.quote(arg) for arg in self.argv) + "\n"
        stdin = base64.b64encode(self.stdin).decode() if self.stdin else "-"
        return (f"{self.request_id} run {self.timeout:.3f} {self.output_limit} "
                f"{base64.b64encode(script.encode()).decode()} {stdin}\n").encode()


@dataclass(frozen=True)
class Ready:
    """The init listens and takes the command next."""


@dataclass(frozen=True)
class Output:
    stream: str  # out or err
    data: bytes


@dataclass(frozen=True)
class End:
    code: int
    timed_out: bool


Frame = Ready | Output | End
END = re.compile(r"(\d{1,3}) ([01])")


def parse_frame(line: bytes, request_id: str) -> Frame | None:
    """The frame ``line`` holds for ``request_id``; None for another request's (a late
    answer of an earlier exec), or for a line that is no frame (the tail of one cut when
    its reader went away)."""
    try:
        text = line.decode("ascii").rstrip("\n")
    except UnicodeDecodeError:
        return None
    frame_id, _, rest = text.partition(" ")
    if frame_id != request_id:
        return None
    kind, _, value = rest.partition(" ")
    if kind == "ready" and not value:
        return Ready()
    if kind in ("out", "err"):
        try:
            return Output(kind, base64.b64decode(value, validate=True))
        except binascii.Error:
            return None
    ended = END.fullmatch(value) if kind == "end" else None
    if ended is not None:
        return End(int(ended.group(1)), ended.group(2) == "1")
    return None


@dataclass
class Answer:
    """An exec's answer as its frames come: each output kept up to ``limit`` bytes."""

    limit: int = EXEC_OUTPUT_LIMIT
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)

    def add(self, output: Output) -> None:
        kept = self.out if output.stream == "out" else self.err
        kept.extend(output.data[:max(0, self.limit - len(kept))])

    def result(self, end: End) -> ExecResult:
        """What the API answers, as for a container (``process.control.run_bounded``): a
        command killed for its timeout exits 124 by SIGKILL, and 128+N is signal N."""
        out = bytes(self.out).decode(errors="replace")
        err = bytes(self.err).decode(errors="replace")
        if end.timed_out:
            return ExecResult(exit_code=124, stdout=out, stderr=err + TIMED_OUT,
                              exit_signal=signals.SIGKILL)
        return ExecResult(exit_code=end.code, stdout=out, stderr=err,
                          exit_signal=end.code - 128 if end.code > 128 else None)


class GuestExec:
    """Execs into VMs through their inits' exec lines, one at a time per VM."""

    def __init__(self, boot_wait: float = BOOT_WAIT, answer_grace: float = ANSWER_GRACE,
                 ) -> None:
        self.boot_wait = boot_wait
        self.answer_grace = answer_grace
        # A VM's lock lives while an exec holds or waits for it, and no longer.
        self.locks: weakref.WeakValueDictionary[str, asyncio.Lock] = \
            weakref.WeakValueDictionary()

    async def run(self, machine_id: str, line: Path, request: ExecRequest,
                  wake: Callable[[], Awaitable[object]]) -> ExecResult:
        """Run ``request`` in the VM whose exec line is the socket ``line``; ``wake`` tells
        its init to read that line."""
        lock = self.locks.get(machine_id)
        if lock is None:
            lock = self.locks[machine_id] = asyncio.Lock()
        async with lock:
            return await self._run(machine_id, line, request, wake)

    async def _run(self, machine_id: str, line: Path, request: ExecRequest,
                   wake: Callable[[], Awaitable[object]]) -> ExecResult:
        loop = asyncio.get_running_loop()
        not_listening = NoAnswer(f"machine {machine_id}'s VM is not taking execs: its init "
                                 f"did not answer in {self.boot_wait:g} s (still booting?)")
        deadline = loop.time() + self.boot_wait
        reader, writer = await self._connect(line, deadline, not_listening)
        try:
            writer.write(request.hello())
            await writer.drain()
            ready = asyncio.ensure_future(read_ready(reader, request.request_id))
            try:
                while not ready.done():
                    if loop.time() >= deadline:
                        raise not_listening
                    await wake()
                    await asyncio.wait({ready}, timeout=min(WAKE_EVERY, deadline - loop.time()))
                ready.result()
            finally:
                ready.cancel()
            writer.write(request.run())
            await writer.drain()
            try:
                return await within(read_answer(reader, request),
                                    request.timeout + self.answer_grace)
            except TimeoutError:
                raise NoAnswer(f"machine {machine_id}'s VM gave no answer to the exec "
                               f"{request.timeout + self.answer_grace:g} s after it was sent"
                               ) from None
        except EOFError:
            raise TaskGone(f"machine {machine_id}'s VM ended during the exec") from None
        except (OSError, ValueError) as exc:  # ValueError: a line past FRAME_LIMIT
            raise DriverError(f"machine {machine_id}'s exec line: {exc}") from exc
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _connect(self, line: Path, deadline: float, not_listening: NoAnswer,
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect to qemu's socket of the exec line, which a qemu just started may not
        have made yet."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                return await asyncio.open_unix_connection(str(line), limit=FRAME_LIMIT)
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                if loop.time() >= deadline:
                    raise not_listening from exc
            await asyncio.sleep(CONNECT_EVERY)


async def read_ready(reader: asyncio.StreamReader, request_id: str) -> None:
    """Read until this request's ``ready``, leaving others' frames behind."""
    while not isinstance(parse_frame(await _line(reader), request_id), Ready):
        pass


async def read_answer(reader: asyncio.StreamReader, request: ExecRequest) -> ExecResult:
    """Read this request's answer to its end, leaving others' frames behind."""
    answer = Answer(request.output_limit)
    while True:
        frame = parse_frame(await _line(reader), request.request_id)
        if isinstance(frame, Output):
            answer.add(frame)
        elif isinstance(frame, End):
            return answer.result(frame)


async def _line(reader: asyncio.StreamReader) -> bytes:
    line = await reader.readline()
    if not line.endswith(b"\n"):
        raise EOFError  # qemu closed it: the VM is gone
    return line
