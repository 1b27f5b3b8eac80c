"""Spares are wired after the starts under way, not in the middle of them."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress

from bodega.worker.drivers.null import NullDriver
from bodega.worker.host.network import HostNetwork
from bodega.worker.upkeep import wire_ahead


class Recording(HostNetwork):
    """Host networking that records what it is asked to wire; ``wired``: ready addresses."""

    def __init__(self, wired: set[int]) -> None:
        super().__init__("127.0.0.1", ipaddress.ip_network("10.0.0.0/24"))
        self.wired = wired
        self.prewarmed: list[list[int]] = []

    def ready(self, index: int) -> bool:
        return index in self.wired

    async def prewarm(self, indexes: list[int]) -> None:
        self.prewarmed.append(indexes)


class Drives:
    """One operation being driven, until ``done`` is set; after_drives as Lifecycle's."""

    def __init__(self) -> None:
        self.spares_changed = asyncio.Event()
        self.done = asyncio.Event()
        self.driving = asyncio.ensure_future(self.done.wait())
        self.waited = 0  # how many times the spares waited for it

    async def after_drives(self, timeout: float) -> None:
        self.waited += 1
        await asyncio.wait({self.driving}, timeout=timeout)


async def test_spares_are_wired_once_the_start_under_way_has_ended() -> None:
    network, drives = Recording({3}), Drives()  # 3 is ready for the next create
    task = asyncio.create_task(wire_ahead(network, lambda: ([3, 4], {9: None}), drives,
                                          NullDriver()))
    try:
        for _ in range(20):
            await asyncio.sleep(0)
        assert network.prewarmed == []  # a start is being driven: nothing is spawned now
        drives.done.set()
        async with asyncio.timeout(5):
            while not network.prewarmed:
                await asyncio.sleep(0.001)
        assert network.prewarmed == [[3, 4, 9]]
        assert drives.waited == 1
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_with_no_spare_left_the_spares_are_wired_at_once() -> None:
    network, drives = Recording({9}), Drives()  # only a resting machine's is wired
    task = asyncio.create_task(wire_ahead(network, lambda: ([3, 4], {9: None}), drives,
                                          NullDriver()))
    try:
        async with asyncio.timeout(5):
            while not network.prewarmed:
                await asyncio.sleep(0.001)
        assert network.prewarmed == [[3, 4, 9]]
        assert drives.waited == 0  # wired without waiting for the start under way
    finally:
        drives.done.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
