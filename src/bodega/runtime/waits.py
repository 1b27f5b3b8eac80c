"""Waiting with a time limit without ever losing a cancellation.

Python 3.11's ``asyncio.wait_for`` returns the awaited result when the
waiting task is cancelled at the instant that result arrives: the
cancellation is lost. A loop waiting that way (a nudge event, a heartbeat)
then outlives the stop that cancelled it, and the stop awaiting it never
ends; a daemon hangs on Ctrl-C until it is killed. ``asyncio.timeout``
counts cancellations and delivers each one, so every timed wait in bodega
goes through ``within`` (``tests/unit/runtime/test_waits.py`` shows both).

Waiting on the kernel without a thread or a poll: ``when_readable`` (a file
descriptor) and ``process_ended`` (any process, by its pidfd).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``await awaitable``, cancelled with ``TimeoutError`` after ``seconds`` (None: no limit)."""
    async with asyncio.timeout(seconds):
        return await awaitable


def when_readable(fd: int) -> asyncio.Future[None]:
    """A future done once ``fd`` turns readable; the loop stops watching it then, or
    when the future is cancelled."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()

    def turned() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(fd, turned)
    readable.add_done_callback(lambda _: loop.remove_reader(fd))
    return readable


def process_ended(pid: int) -> asyncio.Future[None]:
    """A future done once process ``pid`` has ended (at once if there is none): its pidfd
    turns readable, for a child or not. The pidfd is closed when the future is done or
    cancelled."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        gone.set_result(None)
        return gone
    ended = when_readable(pidfd)
    ended.add_done_callback(lambda _: os.close(pidfd))
    return ended
