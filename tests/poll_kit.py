"""Waiting for a condition in a test: bounded polling, never a fixed sleep.

One poller for every test: ``until`` in async code (a check that is a plain function,
or one that returns an awaitable), ``until_sync`` in code that runs in a thread of its
own (a multi-host test driving commands). A module that always waits longer or looks
less often binds its own defaults with ``functools.partial``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def until(check: Callable[..., Any], timeout: float = 10.0, every: float = 0.02,
                what: str = "condition") -> Any:
    """Return ``check()``'s first true answer (awaited, if it is awaitable); fail the test
    after ``timeout`` seconds, naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if inspect.isawaitable(answer):
            answer = await answer
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout:g}s")
        await asyncio.sleep(every)


def until_sync(check: Callable[[], T | None], what: str, timeout: float = 10.0,
               every: float = 0.1) -> T:
    """``until`` for code that is not a coroutine: it sleeps its thread between looks."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout:g}s")
        time.sleep(every)
