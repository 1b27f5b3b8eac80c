"""The fork server: one interpreter that has imported bodega, forking each component.

Every component of a local cluster is ``python -m bodega <role> ...``. Started
that way, each pays for an interpreter and a copy of every module it imports of
its own: about 50 MiB of a worker's, so a host of 20 workers holds 20 copies of
the same modules. The fork server imports them once, moves what it holds out of
the garbage collector's reach (``gc.freeze``: a collection writes to every
object's header, and a write copies the page) and forks a child for each
component. The pages of the modules a child never writes to stay shared, with
the server and with every sibling::

    supervisor ── socketpair (SOCK_SEQPACKET) ──▶ fork server ──fork──▶ component
      Spawn {argv, cwd} + its log's fd              (imports once,        (the command
        + a pipe holding its environment            reaps its children)   line it shows)
      ◀── Ready, Spawned {pid}, Exited {pid, code}

A child is the component its command line would start: the environment, working
directory, stdout and stderr it was given, signals at their defaults, ``sys.argv``
its arguments, and ``ps`` shows that command line (``setproctitle``). The
environment carries the component's secrets (the admin token for a broker), so
the server never reads it: it comes in a pipe only the child reads, and no later
sibling inherits a copy in the server's memory. It stops
when the supervisor does (``BODEGA_SUPERVISOR_PID``, ``runtime/lifecycle.py``),
not when the fork server does: a fork server that dies leaves its children
running, and the supervisor starts another for the next component it starts
(``cluster/supervisor.py``).

The server stops when the supervisor closes its end of the socket, or dies.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import runpy
import selectors
import signal
import socket
import sys
import threading

from pydantic import BaseModel, ConfigDict, TypeAdapter

# What the components import as they start, so that a child finds it imported.
PRELOAD = ("setproctitle", "bodega.cli.root", "bodega.cli.daemons.worker",
           "bodega.cli.daemons.broker",
           "bodega.cli.daemons.proxy", "bodega.cli.daemons.agent",
           "bodega.cli.daemons.image_registry",
           "bodega.worker.drivers.null", "bodega.wire.transport.stream_http",
           "bodega.wire.public.jobs.client",
           "bodega.broker.view.registry_catalog", "uvicorn.protocols.http.httptools_impl",
           "uvicorn.lifespan.on", "uvicorn.loops.uvloop", "uvloop")
MAX_MESSAGE = 1 << 20  # a spawn (its arguments, working directory) or a reply fits
PR_SET_PDEATHSIG = 1


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Spawn(Message):
    """Start a component: ``argv`` is ``[python, -m, bodega, ...]``. Two fds come with
    the message: its log, and a pipe holding its environment (JSON)."""

    argv: list[str]
    cwd: str


Environment = TypeAdapter(dict[str, str])


class Ready(Message):
    ready: bool = True  # the modules are imported: spawns are forks from now on


class Spawned(Message):
    pid: int


class Refused(Message):
    refused: str  # why this spawn could not be forked (the supervisor starts it itself)


class Exited(Message):
    pid: int
    code: int  # as asyncio reports it: the exit status, or minus the signal that ended it


Reply = Ready | Spawned | Refused | Exited


def bodega_command(argv: list[str]) -> bool:
    """``argv`` runs bodega's own command line with this interpreter."""
    return argv[:3] == [sys.executable, "-m", "bodega"]


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            if name.startswith("uvloop") or name.startswith("uvicorn.loops"):
                continue  # optional: the daemons run on asyncio's own loop without it
            raise
    if threading.active_count() != 1:  # a fork keeps only the thread that forked
        raise SystemExit("the fork server started a thread while importing; it cannot fork")
    gc.collect()
    gc.freeze()


def _send(sock: socket.socket, message: Message) -> None:
    """Tell the supervisor; if it has gone, the next read says so and the server ends."""
    with contextlib.suppress(ConnectionError):  # BrokenPipeError is one
        sock.send(message.model_dump_json().encode())


def serve(sock: socket.socket) -> tuple[Spawn, int, int] | None:
    """Fork a child for each spawn asked for, reap them, say so; returns in a child only
    (what it is to become, its log's fd and its environment's), or None when the
    supervisor closed."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)  # to be woken by the wakeup fd
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj == wake_r:
                os.read(wake_r, 4096)
                _reap(sock)
                continue
            data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 2)
            if not data:
                return None
            try:
                spawn = Spawn.model_validate_json(data)
            except ValueError as exc:
                _close_all(fds)
                _send(sock, Refused(refused=f"not a spawn: {exc}"))
                continue
            if not bodega_command(spawn.argv) or len(fds) != 2:
                _close_all(fds)
                _send(sock, Refused(refused="only bodega's own commands are forked, each with "
                                            "a log and an environment"))
                continue
            try:
                pid = os.fork()
            except OSError as exc:  # out of memory or processes: this one starts another way
                _close_all(fds)
                _send(sock, Refused(refused=f"fork failed: {exc}"))
                continue
            if pid == 0:
                signal.set_wakeup_fd(-1)
                selector.close()
                os.close(wake_r)
                os.close(wake_w)
                sock.close()
                return spawn, fds[0], fds[1]
            _close_all(fds)
            _send(sock, Spawned(pid=pid))


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, Exited(pid=pid, code=os.waitstatus_to_exitcode(status)))


def become(spawn: Spawn, log_fd: int, env_fd: int) -> None:
    """Turn this child into the component ``spawn`` names, as an exec would have left it."""
    with os.fdopen(env_fd, "rb") as pipe:
        env = Environment.validate_json(pipe.read())
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(spawn.cwd)
    import setproctitle

    # Before the environment changes: the title takes over the memory of the server's
    # argv and environment, which it can find only while they are as the kernel gave them.
    setproctitle.setproctitle(" ".join(spawn.argv))
    os.environ.clear()
    os.environ.update(env)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    sys.argv = ["-m", *spawn.argv[3:]]  # argv[0] becomes __main__'s path, as under -m


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to act on
    preload()
    _send(sock, Ready())
    child = serve(sock)
    if child is None:
        return
    become(*child)
    runpy.run_module("bodega", run_name="__main__", alter_sys=True)  # ``python -m bodega``


if __name__ == "__main__":
    main()
