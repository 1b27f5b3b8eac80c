"""Timed waits deliver every cancellation, even one landing as the wait ends; waits on a
file descriptor and on a process's end, on real pipes and processes."""

from __future__ import annotations

import asyncio
import contextlib
import os

import pytest

from bodega.runtime.waits import process_ended, when_readable, within


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


async def test_when_readable_waits_for_data_and_stops_watching_when_cancelled() -> None:
    read, write = os.pipe()
    try:
        readable = when_readable(read)
        await asyncio.sleep(0.05)
        assert not readable.done()
        os.write(write, b"!")
        await within(readable, 5)
        cancelled = when_readable(write)  # a pipe's write end is writable, never readable
        cancelled.cancel()
        await asyncio.sleep(0)
        assert not asyncio.get_running_loop().remove_reader(write)  # no longer watched
    finally:
        os.close(read)
        os.close(write)


async def test_process_ended_follows_any_process_to_its_end() -> None:
    sleeper = await asyncio.create_subprocess_exec("sleep", "30")
    ended = process_ended(sleeper.pid)
    await asyncio.sleep(0.05)
    assert not ended.done()
    sleeper.kill()
    await within(ended, 5)
    await sleeper.wait()
    assert process_ended(sleeper.pid).done()  # gone already: done at once
