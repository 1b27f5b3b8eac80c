"""Waiting with a time limit without ever losing a cancellation.

Python 3.11's ``asyncio.wait_for`` returns the awaited result when the
waiting task is cancelled at the instant that result arrives: the
cancellation is lost. A loop waiting that way (a nudge event, a heartbeat)
then outlives the stop that cancelled it, and the stop awaiting it never
ends; a daemon hangs on Ctrl-C until it is killed. ``asyncio.timeout``
counts cancellations and delivers each one, so every timed wait in bodega
goes through ``within`` (``tests/unit/runtime/test_waits.py`` shows both).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``await awaitable``, cancelled with ``TimeoutError`` after ``seconds`` (None: no limit)."""
    async with asyncio.timeout(seconds):
        return await awaitable
