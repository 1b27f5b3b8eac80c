"""Running a daemon until SIGINT/SIGTERM, or until the process that started it is gone."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

PARENT_POLL = 0.5


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
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if watcher is not None:
            watcher.cancel()


async def _watch_parent(parent: int, stopped: asyncio.Future[str]) -> None:
    while os.getppid() == parent:
        await asyncio.sleep(PARENT_POLL)
    if not stopped.done():
        stopped.set_result("parent exited")


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
) -> str:
    await start()
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
