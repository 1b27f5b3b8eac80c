"""Running a daemon until SIGINT/SIGTERM, or until the process that started it is gone."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bodega.runtime.ready import Ready

PARENT_POLL = 0.5
log = logging.getLogger("bodega.lifecycle")


async def until_stopped(exit_with_parent: bool = False) -> str:
    """Wait for SIGINT or SIGTERM (or the parent's death); returns what ended the wait."""
    loop = asyncio.get_running_loop()
    stopped: asyncio.Future[str] = loop.create_future()

    def on_signal(name: str) -> None:
        if not stopped.done():
            stopped.set_result(name)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig.name)
    watcher = None
    if exit_with_parent:
        watcher = asyncio.create_task(_watch_parent(os.getppid(), stopped))
    try:
        return await stopped
    finally:
        # A second Ctrl-C while shutting down must not kill the shutdown half way (a daemon
        # killed there leaves its machines running): from now on signals are only noted.
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, _already_stopping, sig.name)
        if watcher is not None:
            watcher.cancel()


def _already_stopping(name: str) -> None:
    log.warning("%s received while stopping; still stopping (SIGKILL forces it, leaving "
                "machines running)", name)


async def _watch_parent(parent: int, stopped: asyncio.Future[str]) -> None:
    while os.getppid() == parent:
        await asyncio.sleep(PARENT_POLL)
    if not stopped.done():
        stopped.set_result("parent exited")


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
    stop: Callable[[], Awaitable[None]],
    *,
    exit_with_parent: bool = False,
    ready_file: Path | None = None,
    ready: Callable[[], Ready] | None = None,
) -> str:
    """Start, then tell whoever waits (``ready_file``: our pid and ``ready()``, written
    atomically), then run until stopped, then stop."""
    await start()
    if ready_file is not None and ready is not None:
        write_ready(ready_file, ready())
    try:
        return await until_stopped(exit_with_parent)
    finally:
        await stop()


def event_loop_policy() -> None:
    """Use uvloop when it is installed: the daemons spend their time in the event loop."""
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
