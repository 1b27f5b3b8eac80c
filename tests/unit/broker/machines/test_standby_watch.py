"""The standby loop: a leased standby waits and is tried again; a started one is not
asked twice; the log line names standby, primary and why. When the primary's worker
is back, and stays back for the settle time, the standby is stopped once, whichever
broker and however many of them see it; a flapping worker never gets it stopped."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from bodega.broker.machines.standby_watch import StandbyWatch
from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.errors import Conflict
from bodega.model.machine import Machine

SETTLE = 10.0


def view() -> MemoryCatalog:
    catalog = MemoryCatalog()
    catalog.put("machines", "p1", {"id": "p1", "app": "ticker", "worker": "ams-1",
                                   "state": "started", "config": {"image": "x"}})
    catalog.put("machines", "s1", {"id": "s1", "app": "ticker", "worker": "ams-2",
                                   "state": "stopped",
                                   "config": {"image": "x", "standbys": ["p1"]}})
    catalog.set_status("ams-1", "alive", incarnation=1, generation=1)
    catalog.set_status("ams-2", "alive", incarnation=1, generation=1)
    return catalog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Workers:
    """Start and stop as a worker does: a start of a started machine, or a stop of a
    stopped one, changes nothing; the view shows the new state at once."""

    def __init__(self, catalog: MemoryCatalog) -> None:
        self.catalog = catalog
        self.calls: list[tuple[str, str, str]] = []
        self.refuse: list[Exception] = []

    async def start(self, worker: str, machine_id: str) -> None:
        await self._act("start", worker, machine_id, "started")

    async def stop(self, worker: str, machine_id: str) -> None:
        await self._act("stop", worker, machine_id, "stopped")

    async def _act(self, verb: str, worker: str, machine_id: str, state: str) -> None:
        self.calls.append((verb, worker, machine_id))
        if self.refuse:
            raise self.refuse.pop(0)
        row = self.catalog.get("machines", machine_id)
        assert row is not None
        assert row["worker"] == worker
        self.catalog.put("machines", machine_id, {**row, "state": state})

    def watch(self, clock: Clock, **knobs: Any) -> StandbyWatch:
        return StandbyWatch(self.catalog, self.start, self.stop, settle=SETTLE, clock=clock,
                            **knobs)


def state(catalog: MemoryCatalog, machine_id: str) -> str:
    row = catalog.get("machines", machine_id)
    assert row is not None
    return str(row["state"])


async def test_a_leased_standby_is_retried_and_started_once(
        caplog: pytest.LogCaptureFixture) -> None:
    catalog = view()
    calls: list[tuple[str, str]] = []

    async def start(worker: str, machine_id: str) -> None:
        calls.append((worker, machine_id))
        if len(calls) == 1:
            raise Conflict("failed_precondition: lease currently held by deploy")

    async def stop(worker: str, machine_id: str) -> None:
        raise AssertionError("nothing is to stop")

    watch = StandbyWatch(catalog, start, stop)
    assert await watch.once() is False  # nothing to do while ams-1 is alive
    assert calls == []
    catalog.set_status("ams-1", "dead")
    caplog.set_level(logging.INFO, "bodega.broker.machines.standby")
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

    async def stop(worker: str, machine_id: str) -> None:
        raise AssertionError("nothing is to stop")

    watch = StandbyWatch(catalog, start, stop, retry=600, sweep=600)
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


async def take_over(catalog: MemoryCatalog, workers: Workers, watch: StandbyWatch) -> None:
    catalog.set_status("ams-1", "dead", incarnation=1, generation=1)
    await watch.once()
    assert state(catalog, "s1") == "started"


async def test_the_primary_back_for_the_settle_time_gets_its_standby_stopped(
        caplog: pytest.LogCaptureFixture) -> None:
    catalog, clock = view(), Clock()
    workers = Workers(catalog)
    watch = workers.watch(clock)
    watch.on_machine("s1", catalog.get(Machine, "s1"))
    await take_over(catalog, workers, watch)
    caplog.set_level(logging.INFO, "bodega.broker.machines.standby")
    # Back: declared dead, it rejoined as a new generation; the primary still runs there.
    clock.now += 120
    catalog.set_status("ams-1", "alive", incarnation=1, generation=2)
    assert await watch.once() is True  # not settled yet: a stop is still to come
    clock.now += SETTLE - 1
    assert await watch.once() is True
    assert state(catalog, "s1") == "started"
    assert watch.alive.until_settled(clock.now) == 1
    clock.now += 1
    assert await watch.once() is False
    assert state(catalog, "s1") == "stopped"
    assert "standby s1 of app ticker on ams-2 stopped: its primary p1 on worker ams-1 is " \
        "running again" in caplog.text
    for _ in range(5):  # and it stays so: nothing more is asked
        clock.now += 7
        assert await watch.once() is False
    assert workers.calls == [("start", "ams-2", "s1"), ("stop", "ams-2", "s1")]


async def test_a_primary_that_did_not_come_back_keeps_its_standby_running() -> None:
    catalog, clock = view(), Clock()
    workers = Workers(catalog)
    watch = workers.watch(clock)
    await take_over(catalog, workers, watch)
    # The host rebooted; its worker re-adopted nothing: the primary rests.
    catalog.put("machines", "p1", {**(catalog.get("machines", "p1") or {}), "state": "stopped"})
    catalog.set_status("ams-1", "alive", incarnation=1, generation=2)
    for _ in range(10):
        clock.now += SETTLE
        await watch.once()
    assert state(catalog, "s1") == "started"
    assert workers.calls == [("start", "ams-2", "s1")]


async def test_a_flapping_primary_worker_never_gets_the_standby_stopped() -> None:
    catalog, clock = view(), Clock()
    workers = Workers(catalog)
    watch = workers.watch(clock)
    await take_over(catalog, workers, watch)
    for step in range(60):  # alive and suspect by turns, every 2 s, for two minutes
        clock.now += 2
        catalog.set_status("ams-1", "alive" if step % 2 else "suspect", incarnation=step,
                           generation=2)
        await watch.once()
    assert state(catalog, "s1") == "started"
    # Then it stays alive: one stop, once it has settled.
    for _ in range(10):
        clock.now += 2
        await watch.once()
    assert state(catalog, "s1") == "stopped"
    assert workers.calls == [("start", "ams-2", "s1"), ("stop", "ams-2", "s1")]


async def test_a_leased_standby_is_stopped_once_the_deploy_lets_go() -> None:
    catalog, clock = view(), Clock()
    workers = Workers(catalog)
    watch = workers.watch(clock)
    await take_over(catalog, workers, watch)
    catalog.set_status("ams-1", "alive", incarnation=2, generation=1)
    clock.now += SETTLE
    await watch.once()  # settles from this look on
    clock.now += SETTLE
    workers.refuse = [Conflict("failed_precondition: lease currently held by deploy")]
    assert await watch.once() is True  # pending: tried again
    assert state(catalog, "s1") == "started"
    clock.now += 5
    assert await watch.once() is False
    assert state(catalog, "s1") == "stopped"


async def test_two_brokers_deciding_at_once_stop_the_standby_and_nothing_more() -> None:
    catalog, clock = view(), Clock()
    workers = Workers(catalog)
    first, second = workers.watch(clock), workers.watch(clock)
    await take_over(catalog, workers, first)
    await second.once()  # the second broker sees it started already: nothing to do
    catalog.set_status("ams-1", "alive", incarnation=1, generation=2)
    await first.once()
    await second.once()
    clock.now += SETTLE
    # Both decide from the same view before either's stop shows in it.
    decided = [[g.standby for g in w.give_backs(clock.now)] for w in (first, second)]
    assert decided == [["s1"], ["s1"]]
    await asyncio.gather(first.once(), second.once())
    assert state(catalog, "s1") == "stopped"
    for _ in range(5):
        clock.now += 7
        await asyncio.gather(first.once(), second.once())
    assert state(catalog, "s1") == "stopped"
    assert [c for c in workers.calls if c[0] == "start"] == [("start", "ams-2", "s1")]


async def test_a_standby_created_or_destroyed_later_is_followed() -> None:
    catalog, clock = view(), Clock()
    workers = Workers(catalog)
    watch = workers.watch(clock)
    standby = {"id": "s2", "app": "ticker", "worker": "ams-3", "state": "stopped",
               "config": {"image": "x", "standbys": ["p2"]}}
    catalog.put("machines", "p2", {"id": "p2", "app": "ticker", "worker": "ams-4",
                                   "state": "started", "config": {"image": "x"}})
    catalog.put("machines", "s2", standby)
    catalog.set_status("ams-3", "alive")
    catalog.set_status("ams-4", "dead")
    await watch.once()
    assert state(catalog, "s2") == "stopped"  # not known to the watch yet
    watch.on_machine("s2", Machine.model_validate(standby))
    await watch.once()
    assert state(catalog, "s2") == "started"
    watch.on_machine("s1", Machine.model_validate(
        {**(catalog.get("machines", "s1") or {}), "state": "destroyed"}))
    watch.on_machine("s2", None)
    assert watch.pairs() == []


async def test_the_loop_stops_the_standby_when_the_worker_settles_without_a_nudge() -> None:
    catalog = view()
    workers = Workers(catalog)
    watch = StandbyWatch(catalog, workers.start, workers.stop, retry=600, sweep=600,
                         settle=0.2)
    await take_over(catalog, workers, watch)
    catalog.set_status("ams-1", "alive", incarnation=1, generation=2)
    task = asyncio.create_task(watch.run())
    try:
        for _ in range(300):
            if state(catalog, "s1") == "stopped":
                break
            await asyncio.sleep(0.05)
        assert state(catalog, "s1") == "stopped"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
