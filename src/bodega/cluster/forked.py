"""The supervisor's side of the fork server: start it, ask it for components, follow them.

``ForkServer.start`` runs ``python -m bodega.cluster.forkserver`` and waits until
it has imported bodega; ``spawn`` hands it a component's command line and log,
and its environment in a pipe (``environment_pipe``: the server passes it on
unread), and returns a ``ForkedProcess``: the pid, ``wait()``,
``returncode``, ``send_signal`` and ``kill``, as an ``asyncio.subprocess.Process``
has them, so the supervisor watches, restarts and stops a forked component as it
does one it started itself.

A forked component is the fork server's child: the server reaps it and says how
it exited. Its end is also watched here on a pidfd, so that a fork server that
died does not leave the supervisor waiting on children it can no longer hear of
(their exit status is then unknown: 255, as asyncio reports a child it lost).
A spawn the server cannot make raises ``ForkUnavailable``: the supervisor starts
that component itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import sys
from collections import deque
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from bodega.cluster.forkserver import (
    MAX_MESSAGE,
    Exited,
    Ready,
    Refused,
    Reply,
    Spawn,
    Spawned,
    bodega_command,
)
from bodega.runtime.waits import process_ended, within

log = logging.getLogger("bodega.cluster")

START_TIMEOUT = 30.0
STOP_GRACE = 5.0
LOST = 255  # the exit status of a child whose end the fork server did not live to report
REPORT_GRACE = 2.0  # how long an ended child's status may trail its pidfd
PIPE_DEFAULT = 65536  # a pipe's capacity until it is set
_REPLY: TypeAdapter[Reply] = TypeAdapter(Reply)


class ForkUnavailable(RuntimeError):
    """The fork server is gone, or refused this spawn: start the component another way."""


class ForkedProcess:
    """A component the fork server forked, as the supervisor sees it."""

    def __init__(self, pid: int, ended: asyncio.Future[int]) -> None:
        self.pid = pid
        self._ended = ended  # its exit status, as the fork server reports it
        self._gone = process_ended(pid)  # on its pidfd: the server may not live to report

    @property
    def returncode(self) -> int | None:
        return self._ended.result() if self._ended.done() else None

    async def wait(self) -> int:
        if not self._ended.done():
            watched: list[asyncio.Future[Any]] = [self._ended, self._gone]
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        if not self._ended.done():  # it ended; its status may still be on its way
            with contextlib.suppress(TimeoutError):
                await within(asyncio.shield(self._ended), REPORT_GRACE)
        if not self._ended.done():
            self._ended.set_result(LOST)
        self._gone.cancel()  # done already, or no longer watched: its pidfd is closed
        return self._ended.result()

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def environment_pipe(env: dict[str, str]) -> int:
    """A pipe's read end holding ``env`` as JSON, whole (the pipe is sized to it)."""
    data = json.dumps(env).encode()
    read, write = os.pipe()
    try:
        if len(data) > PIPE_DEFAULT:
            fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, len(data))
        if os.write(write, data) != len(data):
            raise OSError("a short write")
    except OSError as exc:
        os.close(read)
        raise ForkUnavailable(f"the environment ({len(data)} bytes) did not fit a pipe: "
                              f"{exc}") from None
    finally:
        os.close(write)
    return read


class ForkServer:
    def __init__(self, process: asyncio.subprocess.Process, sock: socket.socket) -> None:
        self.process = process
        self._sock = sock
        self._ready = asyncio.get_running_loop().create_future()
        self._asked: deque[asyncio.Future[ForkedProcess]] = deque()  # answered in order
        self._ended: dict[int, asyncio.Future[int]] = {}  # each forked child's exit status
        self.alive = True
        asyncio.get_running_loop().add_reader(sock, self._readable)

    @classmethod
    async def start(cls, log_file: Path, env: dict[str, str]) -> ForkServer:
        """Start the fork server and wait until it has imported bodega."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with log_file.open("ab") as out:
                process = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "bodega.cluster.forkserver", str(theirs.fileno()),
                    pass_fds=(theirs.fileno(),), stdin=asyncio.subprocess.DEVNULL,
                    stdout=out, stderr=out, env=env)
        finally:
            theirs.close()
        ours.setblocking(False)
        server = cls(process, ours)
        try:
            await within(asyncio.shield(server._ready), START_TIMEOUT)
        except (TimeoutError, ForkUnavailable) as exc:
            await server.stop()
            raise ForkUnavailable(f"the fork server did not start ({exc or 'timed out'}); "
                                  f"see {log_file}") from None
        log.info("fork server ready (pid %s): components start as its forks", process.pid)
        return server

    async def spawn(self, argv: list[str], env: dict[str, str], cwd: Path,
                    log_fd: int) -> ForkedProcess:
        if not self.alive:
            raise ForkUnavailable("the fork server has stopped")
        if not bodega_command(argv):
            raise ForkUnavailable(f"{argv[0]} is not this interpreter running bodega")
        message = Spawn(argv=argv, cwd=str(cwd)).model_dump_json().encode()
        answer: asyncio.Future[ForkedProcess] = asyncio.get_running_loop().create_future()
        env_fd = environment_pipe(env)
        self._asked.append(answer)
        try:
            socket.send_fds(self._sock, [message], [log_fd, env_fd])
        except OSError as exc:
            self._asked.remove(answer)
            self._lost(f"sending to the fork server failed: {exc}")
            raise ForkUnavailable(str(exc)) from None
        finally:
            os.close(env_fd)
        return await answer

    def _readable(self) -> None:
        while True:
            try:
                data = self._sock.recv(MAX_MESSAGE)
            except BlockingIOError:
                return
            except OSError as exc:
                self._lost(f"reading from the fork server failed: {exc}")
                return
            if not data:
                self._lost("the fork server exited")
                return
            try:
                reply = _REPLY.validate_json(data)
            except ValidationError:
                log.warning("the fork server said something unreadable: %r", data[:200])
                continue
            self._heard(reply)

    def _heard(self, reply: Reply) -> None:
        if isinstance(reply, Ready):
            if not self._ready.done():
                self._ready.set_result(None)
        elif isinstance(reply, Spawned | Refused):
            if not self._asked:
                log.warning("the fork server answered a spawn nobody asked for: %s", reply)
                return
            answer = self._asked.popleft()
            if isinstance(reply, Spawned):
                # Followed from here: its Exited may come in this same read.
                status: asyncio.Future[int] = asyncio.get_running_loop().create_future()
                self._ended[reply.pid] = status
                answer.set_result(ForkedProcess(reply.pid, status))
            else:
                answer.set_exception(ForkUnavailable(reply.refused))
        elif isinstance(reply, Exited):
            ended = self._ended.pop(reply.pid, None)
            if ended is not None and not ended.done():
                ended.set_result(reply.code)

    def _lost(self, why: str) -> None:
        if not self.alive:
            return
        self.alive = False
        asyncio.get_running_loop().remove_reader(self._sock)
        self._sock.close()
        if not self._ready.done():
            self._ready.set_exception(ForkUnavailable(why))
        while self._asked:
            self._asked.popleft().set_exception(ForkUnavailable(why))
        log.warning("%s: components it forked keep running; the next start without it", why)

    async def stop(self) -> None:
        """Close the socket (the server exits), and wait for it."""
        if self.alive:
            self.alive = False
            asyncio.get_running_loop().remove_reader(self._sock)
            self._sock.close()
        try:
            await within(self.process.wait(), STOP_GRACE)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
