"""A daemon's stop that takes too long says what it still waits on, and a quick one says nothing."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from bodega.runtime.lifecycle import awaiting, stop_watched
from bodega.runtime.waits import within


async def _drain_forever(event: asyncio.Event) -> None:
    await event.wait()


async def _close_listener(event: asyncio.Event) -> None:
    await _drain_forever(event)


class _ReleaseAfter(logging.Handler):
    """Sets ``event`` once ``count`` slow-stop reports were logged: the stop under test
    waits on it, so it lasts exactly that many reports whatever the machine's load."""

    def __init__(self, count: int, event: asyncio.Event) -> None:
        super().__init__()
        self.count = count
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if "still stopping" in record.getMessage():
            self.count -= 1
            if self.count == 0:
                self.event.set()


async def test_a_slow_stop_names_the_coroutine_it_is_stuck_in(
        caplog: pytest.LogCaptureFixture) -> None:
    released = asyncio.Event()
    stuck = asyncio.create_task(_drain_forever(asyncio.Event()), name="long-poll")
    release = _ReleaseAfter(2, released)
    logger = logging.getLogger("bodega.lifecycle")
    logger.addHandler(release)
    try:
        with caplog.at_level(logging.WARNING, logger="bodega.lifecycle"):
            # Bounded: a stop that never reported would otherwise wait here for good.
            await within(stop_watched(lambda: _close_listener(released), after=0.1), 30)
    finally:
        logger.removeHandler(release)
    reports = [r.getMessage() for r in caplog.records if "still stopping" in r.getMessage()]
    assert len(reports) == 2, "one report every 0.1 s while the stop runs, none after"
    assert "still stopping after 0.1 s" in reports[0]
    assert "still stopping after 0.2 s" in reports[1]
    first = reports[0].splitlines()
    assert "> _close_listener (test_slow_stop.py:" in first[1]  # the stop's own chain first
    assert re.search(r"> Event\.wait \(locks\.py:\d+\)$", first[1])  # where it is stuck
    assert any(line.strip().startswith("long-poll: _drain_forever") for line in first[2:])
    stuck.cancel()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bodega.lifecycle"):
        await stop_watched(lambda: asyncio.sleep(0.01), after=0.1)
        await asyncio.sleep(0.2)  # the report was cancelled with the stop
    assert not caplog.records


async def test_awaiting_follows_the_chain_of_coroutines_to_where_a_task_waits() -> None:
    event = asyncio.Event()
    task = asyncio.create_task(_close_listener(event), name="closer")
    await asyncio.sleep(0)
    chain = awaiting(task)
    assert chain.startswith("closer: _close_listener (test_slow_stop.py:")
    assert "> _drain_forever (test_slow_stop.py:" in chain
    assert "> Event.wait (locks.py:" in chain
    event.set()
    await task
