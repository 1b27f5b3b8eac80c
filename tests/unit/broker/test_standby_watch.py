"""The standby loop: a leased standby waits and is tried again; a started one is not
asked twice; the log line names standby, primary and why."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bodega.broker.catalog import MemoryCatalog
from bodega.broker.standby_watch import StandbyWatch
from bodega.model.errors import Conflict


def view() -> MemoryCatalog:
    catalog = MemoryCatalog()
    catalog.put("machines", "p1", {"id": "p1", "app": "ticker", "worker": "ams-1",
                                   "state": "started", "config": {}})
    catalog.put("machines", "s1", {"id": "s1", "app": "ticker", "worker": "ams-2",
                                   "state": "stopped", "config": {"standbys": ["p1"]}})
    catalog.set_status("ams-1", "alive")
    catalog.set_status("ams-2", "alive")
    return catalog


async def test_a_leased_standby_is_retried_and_started_once(
        caplog: pytest.LogCaptureFixture) -> None:
    catalog = view()
    calls: list[tuple[str, str]] = []

    async def start(worker: str, machine_id: str) -> None:
        calls.append((worker, machine_id))
        if len(calls) == 1:
            raise Conflict("failed_precondition: lease currently held by deploy")

    watch = StandbyWatch(catalog, start)
    assert await watch.once() is False  # nothing to do while ams-1 is alive
    assert calls == []
    catalog.set_status("ams-1", "dead")
    caplog.set_level(logging.INFO, "bodega.broker.standby")
    assert await watch.once() is True  # leased: pending, tried again later
    assert await watch.once() is False  # started
    assert await watch.once() is False  # the view still says stopped: not asked again
    assert calls == [("ams-2", "s1"), ("ams-2", "s1")]
    assert "standby s1 on ams-2 took over for machine p1 of app ticker: worker ams-1 is dead" \
        in caplog.text


async def test_the_loop_wakes_on_a_membership_change() -> None:
    catalog = view()
    started = asyncio.Event()

    async def start(worker: str, machine_id: str) -> None:
        started.set()

    watch = StandbyWatch(catalog, start, retry=600, sweep=600)
    task = asyncio.create_task(watch.run())
    try:
        await asyncio.sleep(0.05)
        catalog.set_status("ams-1", "left")
        watch.on_member()
        await asyncio.wait_for(started.wait(), 30)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
