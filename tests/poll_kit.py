"""Waiting for a condition in a test: bounded polling, never a fixed sleep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(check: Callable[..., object], timeout: float = 10.0, every: float = 0.02) -> None:
    """Return once ``check()`` is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(every)
