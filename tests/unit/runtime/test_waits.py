"""Timed waits deliver every cancellation, even one landing as the wait ends."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from bodega.runtime.waits import within


async def test_a_cancel_landing_as_the_awaited_event_fires_still_ends_the_loop() -> None:
    """The shape of every nudged loop in the daemons: the stop cancels the loop at the
    instant something sets its event. Python 3.11's ``asyncio.wait_for`` loses that cancel
    and the loop goes round again, so the stop awaiting it never ends."""
    event = asyncio.Event()
    rounds = 0

    async def nudged() -> None:
        nonlocal rounds
        while True:
            with contextlib.suppress(TimeoutError):
                await within(event.wait(), 10)
            rounds += 1
            event.clear()

    task = asyncio.create_task(nudged())
    await asyncio.sleep(0.01)
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await within(asyncio.shield(task), 1)
    assert task.cancelled()
    assert rounds == 0


async def test_a_wait_past_its_limit_raises_and_cancels_what_it_awaited() -> None:
    started = asyncio.Event()
    cancelled = False

    async def slow() -> int:
        nonlocal cancelled
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled = True
            raise
        return 1

    with pytest.raises(TimeoutError):
        await within(slow(), 0.05)
    assert started.is_set()
    assert cancelled
    assert await within(asyncio.sleep(0, result=7), None) == 7
