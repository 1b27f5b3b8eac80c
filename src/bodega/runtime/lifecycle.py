"""Running a daemon until SIGINT/SIGTERM, or until the process that started it is gone.

Why a daemon stops is told to its stop (``StopCause``), since the causes ask different
things of a worker: an operator's Ctrl-C may stop the machines with bodega, a SIGTERM
(systemd's stop, an upgrade) and a supervisor that died leave them running.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import json
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from bodega.runtime.ready import Ready
from bodega.runtime.waits import process_ended

PARENT_POLL = 0.5
PR_SET_PDEATHSIG = 1  # prctl(2)
# Set for a daemon the fork server forked (cluster/forkserver.py): the supervisor it stops
# with is not its parent.
SUPERVISOR_PID = "BODEGA_SUPERVISOR_PID"
SLOW_STOP = 8.0  # seconds a stop may take before the daemon says what it still waits on
log = logging.getLogger("bodega.lifecycle")


class StopCause(StrEnum):
    """What ended a daemon's run."""

    INTERRUPT = "SIGINT"  # Ctrl-C, or a supervisor stopping everything, machines included
    TERMINATE = "SIGTERM"  # systemd's stop, `kill`: a supervisor stopping only itself
    ORPHANED = "parent exited"  # the supervisor that started it is gone (killed, say)


async def until_stopped(exit_with_parent: bool = False) -> StopCause:
    """Wait for SIGINT or SIGTERM (or the parent's death); returns what ended the wait."""
    loop = asyncio.get_running_loop()
    stopped: asyncio.Future[StopCause] = loop.create_future()

    def on_signal(cause: StopCause) -> None:
        if not stopped.done():
            stopped.set_result(cause)

    for sig, cause in ((signal.SIGINT, StopCause.INTERRUPT),
                       (signal.SIGTERM, StopCause.TERMINATE)):
        loop.add_signal_handler(sig, on_signal, cause)
    watcher = None
    if exit_with_parent:
        watcher = asyncio.create_task(_watch_parent(stopped))
    try:
        return await stopped
    finally:
        # A second Ctrl-C while shutting down must not kill the shutdown half way (a daemon
        # killed there leaves its machines running): from now on signals are only noted.
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, _already_stopping, sig.name)
        if watcher is not None:
            watcher.cancel()


def heed_stop_signals() -> None:
    """Undo an inherited "ignore" of the signals that stop a program.

    A shell running a command in the background without job control (``cmd &``
    in a script, a CI step) starts it with SIGINT and SIGQUIT ignored, and an
    ignored signal stays ignored across fork and exec. What a daemon starts
    before ``until_stopped`` sets its handlers (a parked launcher, a machine it
    restarts at start-up) would then shrug off SIGINT, the default stop signal,
    and be killed only at the end of its grace. A handled signal is reset to
    its default at exec, so SIGINT gets Python's handler here, first thing.

    ``nohup`` starts a program with SIGHUP ignored, which it means for the daemon alone
    (a closed terminal must not end it), not for the machines and consoles it starts: a
    machine whose stop signal is SIGHUP, or a console's program hung up, would shrug it
    off. So an ignored SIGHUP gets a handler that does nothing: the daemon still ignores
    it, and what it starts has SIGHUP's default.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGQUIT, signal.SIGTERM):
        if signal.getsignal(sig) is signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _shrug)


def _shrug(_sig: int, _frame: object) -> None:
    """SIGHUP, ignored as ``nohup`` asked, in a way a program started here does not inherit."""


def _already_stopping(name: str) -> None:
    log.warning("%s received while stopping; still stopping (SIGKILL forces it, leaving "
                "machines running)", name)


async def _watch_parent(stopped: asyncio.Future[StopCause]) -> None:
    named = os.environ.get(SUPERVISOR_PID, "")
    if named.isdigit():
        await process_ended(int(named))
    else:
        parent = os.getppid()
        while os.getppid() == parent:
            await asyncio.sleep(PARENT_POLL)
    if not stopped.done():
        stopped.set_result(StopCause.ORPHANED)


def die_with_parent(parent: int) -> Callable[[], None]:
    """A ``preexec_fn`` giving the child SIGTERM when ``parent`` (the caller's pid) dies.

    For a program a component runs as its own part (docker-registry behind the image
    registry's front): a SIGKILL of the component then leaves no orphan serving on. A
    parent gone between the fork and the ``prctl`` would send nothing, so the child
    checks that it still has it, and ends at once if not."""

    def preexec() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def private_dir(path: Path) -> Path:
    """Create ``path`` if needed and make it its owner's alone (0700).

    A daemon's data dir holds every app's machine configs (their env included),
    logs and the replicated view. Machines run on the same host as another
    user, outside any mount namespace of their own, so a directory others may
    enter would let one app's machine read another app's secrets.
    """
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def write_ready(path: Path, ready: Ready) -> None:
    """A daemon's ready file, with its pid, written at once."""
    stamped = ready.model_copy(update={"pid": os.getpid()})
    write_json_atomic(path, stamped.model_dump(exclude_none=True))


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


async def run_daemon(
    start: Callable[[], Awaitable[None]],
    stop: Callable[[StopCause], Awaitable[None]],
    *,
    exit_with_parent: bool = False,
    ready_file: Path | None = None,
    ready: Callable[[], Ready] | None = None,
) -> StopCause:
    """Start, then tell whoever waits (``ready_file``: our pid and ``ready()``, written
    atomically), then run until stopped, then stop, told why (an exception out of the
    run, a cancel say, is told as ``TERMINATE``: nothing asked for the machines)."""
    heed_stop_signals()
    await start()
    if ready_file is not None and ready is not None:
        write_ready(ready_file, ready())
    cause = StopCause.TERMINATE
    try:
        cause = await until_stopped(exit_with_parent)
        log.info("stopping: %s", cause.value)
        return cause
    finally:
        await stop_watched(lambda: stop(cause))
        log.info("stopped")


async def stop_watched(stop: Callable[[], Awaitable[None]], *,
                       after: float = SLOW_STOP) -> None:
    """``stop()``, saying every ``after`` seconds what the daemon still waits on.

    Whoever started the daemon kills it if it does not stop in time (``bodega up``
    after 20 s): without this a slow stop would leave no trace of its cause.
    """
    stopping = asyncio.current_task()
    report = asyncio.create_task(_report_slow_stop(after, stopping))
    try:
        await stop()
    finally:
        report.cancel()


async def _report_slow_stop(after: float, stopping: asyncio.Task[Any] | None) -> None:
    waited = 0.0
    while True:
        await asyncio.sleep(after)
        waited += after
        others = asyncio.all_tasks() - {asyncio.current_task(), stopping}
        chains = ([awaiting(stopping)] if stopping is not None else []) + sorted(
            awaiting(task) for task in others)
        log.warning("still stopping after %.1f s; what each task waits on, the stop "
                    "first:\n  %s", waited, "\n  ".join(chains))


def awaiting(task: asyncio.Task[Any]) -> str:
    """Where ``task`` is suspended: its chain of awaited coroutines, outermost first."""
    steps: list[str] = []
    step: Any = task.get_coro()
    while step is not None:
        frame = getattr(step, "cr_frame", None) or getattr(step, "gi_frame", None)
        if frame is not None:
            steps.append(f"{frame.f_code.co_qualname} ({Path(frame.f_code.co_filename).name}"
                         f":{frame.f_lineno})")
        step = getattr(step, "cr_await", None) or getattr(step, "gi_yieldfrom", None)
    return f"{task.get_name()}: " + " > ".join(steps or ["(running)"])


# The youngest generation is collected after this many allocations (CPython's default is
# 700). A daemon answering a request allocates thousands of short-lived objects (parsed
# JSON, models, rows), and collecting every 700 cost a few percent of each create's CPU
# (bench.placement.creates); what a collection frees is garbage in cycles, which waits a little
# longer now. The older generations keep their defaults.
YOUNG_COLLECTED_AFTER = 20_000


def daemon_runtime() -> None:
    """How a daemon's interpreter runs: on uvloop when it is installed (the daemons spend
    their time in the event loop), and with the garbage collector's youngest generation
    collected less often (``YOUNG_COLLECTED_AFTER``)."""
    _threshold, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTED_AFTER, older, oldest)
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
