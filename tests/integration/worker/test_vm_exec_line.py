"""The worker's end of a VM's exec line against an init played over a real Unix socket:
what it waits for, what it takes as its answer, and one exec at a time per VM."""

from __future__ import annotations

import asyncio
import base64
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bodega.worker.drivers.base import NoAnswer, TaskGone
from bodega.worker.drivers.vm.guest_exec import ExecRequest, GuestExec

Init = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def exec_line(path: Path, init: Init) -> AsyncIterator[None]:
    """``init`` on the other end of each connection to ``path``, as qemu's socket is."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await init(reader, writer)
            await reader.read()  # until the worker lets go, as qemu keeps its end open
        finally:
            writer.close()

    server = await asyncio.start_unix_server(serve, str(path))
    try:
        yield
    finally:
        server.close()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[str, list[str], bytes]:
    """The id, argv and stdin of a run line, read as the init reads them."""
    request_id, verb, _timeout, _cap, script, stdin = (await reader.readline()).split(b" ")
    assert verb == b"run"
    argv = shlex.split(base64.b64decode(script).decode().removeprefix("set -- "))
    return request_id.decode(), argv, b"" if stdin == b"-\n" else base64.b64decode(stdin)


class Wakes:
    def __init__(self) -> None:
        self.count = 0
        self.event = asyncio.Event()

    async def __call__(self) -> bool:
        self.count += 1
        self.event.set()
        return True


async def test_the_answer_is_this_requests_own(tmp_path: Path) -> None:
    wakes = Wakes()

    async def init(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_id = (await reader.readline()).split(b" ")[0].decode()
        await wakes.event.wait()  # the init's loop sleeps until the worker wakes it
        # A late answer of an earlier exec comes first, then this one's.
        writer.write(b"fedcba9876543210 out bGF0ZQo=\nfedcba9876543210 end 0 0\n")
        writer.write(f"{request_id} ready\n".encode())
        run_id, argv, stdin = await read_request(reader)
        assert run_id == request_id
        out = base64.b64encode("|".join(argv).encode() + b"|" + stdin).decode()
        writer.write(f"fedcba9876543210 err bGF0ZQo=\n{request_id} out {out}\n"
                     f"{request_id} err b29wcwo=\n{request_id} end 3 0\n".encode())
        await writer.drain()

    line = tmp_path / "m.exec"
    async with exec_line(line, init):
        result = await GuestExec().run("m", line, ExecRequest(
            ["sh", "-c", "echo $X 'q'", "a\nb"], 5, stdin=b"in\n"), wakes)
    assert (result.exit_code, result.stdout, result.stderr) == \
        (3, "sh|-c|echo $X 'q'|a\nb|in\n", "oops\n")
    assert wakes.count >= 1


async def test_an_init_not_listening_is_a_clear_error_after_a_bounded_wait(
        tmp_path: Path) -> None:
    line = tmp_path / "m.exec"
    with pytest.raises(NoAnswer, match=r"^machine m's VM is not taking execs: its init did "
                                       r"not answer in 0.3 s \(still booting\?\)$"):
        await GuestExec(boot_wait=0.3).run("m", line, ExecRequest(["true"], 5), Wakes())

    heard: list[bytes] = []

    async def booting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heard.append(await reader.readline())  # read, never answered: the init is not up

    wakes = Wakes()
    async with exec_line(line, booting):
        with pytest.raises(NoAnswer, match=r"its init did not answer in 0\.3 s"):
            await GuestExec(boot_wait=0.3).run("m", line, ExecRequest(["true"], 5), wakes)
    assert heard[0].endswith(b" hello\n"), "no command is sent to an init not listening"
    assert wakes.count >= 1


async def test_an_init_silent_past_the_timeout_or_gone_ends_the_exec(tmp_path: Path) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_id = (await reader.readline()).split(b" ")[0].decode()
        writer.write(f"{request_id} ready\n".encode())
        await reader.readline()  # and never answers

    line = tmp_path / "m.exec"
    async with exec_line(line, silent):
        with pytest.raises(NoAnswer, match=r"gave no answer to the exec 1\.2 s after"):
            await GuestExec(answer_grace=0.2).run("m", line, ExecRequest(["true"], 1), Wakes())

    async def gone(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_id = (await reader.readline()).split(b" ")[0].decode()
        writer.write(f"{request_id} ready\n".encode())
        await reader.readline()
        writer.write(f"{request_id} out aGkK\n{request_id} en".encode())
        writer.close()  # qemu gone

    line = tmp_path / "g.exec"
    async with exec_line(line, gone):
        with pytest.raises(TaskGone, match="machine m's VM ended during the exec"):
            await GuestExec().run("m", line, ExecRequest(["true"], 5), Wakes())


async def test_execs_into_one_vm_go_one_at_a_time(tmp_path: Path) -> None:
    connected = 0
    most = 0

    async def init(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connected, most
        connected += 1
        most = max(most, connected)
        request_id = (await reader.readline()).split(b" ")[0].decode()
        writer.write(f"{request_id} ready\n".encode())
        _, argv, _ = await read_request(reader)
        await asyncio.sleep(0.05)  # the command runs a while
        writer.write(f"{request_id} out {base64.b64encode(argv[0].encode()).decode()}\n"
                     f"{request_id} end 0 0\n".encode())
        await writer.drain()
        connected -= 1

    line = tmp_path / "m.exec"
    execs = GuestExec()
    async with exec_line(line, init):
        results = await asyncio.gather(*(
            execs.run("m", line, ExecRequest([f"c{n}"], 5), Wakes()) for n in range(4)))
    assert [r.stdout for r in results] == ["c0", "c1", "c2", "c3"]
    assert most == 1
    assert not execs.locks, "a VM's lock is let go once no exec holds it"
