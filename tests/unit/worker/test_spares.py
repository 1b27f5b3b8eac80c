"""Spares are wired after the starts under way, not in the middle of them."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from pathlib import Path

from bodega.worker.drivers.null import NullDriver
from bodega.worker.host.network import HostNetwork
from bodega.worker.store.database import Store
from bodega.worker.upkeep import (
    FULL_CHECK,
    StoredSpares,
    Want,
    unsettled,
    wants_of,
    wire_ahead,
)


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


class Listed:
    """Spares from two lists, as a test sets them."""

    def __init__(self, free: list[int], at_rest: dict[int, Want]) -> None:
        self.free_list, self.rest = free, at_rest

    def free(self) -> list[int]:
        return self.free_list

    def at_rest(self) -> dict[int, Want]:
        return self.rest


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
    task = asyncio.create_task(wire_ahead(network, Listed([3, 4], {9: ("m9", None)}), drives,
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
    task = asyncio.create_task(wire_ahead(network, Listed([3, 4], {9: ("m9", None)}), drives,
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


def test_a_machine_at_rest_left_settled_is_not_looked_at_again() -> None:
    wants = {3: (None, None), 9: ("m9", Path("/m9"))}
    assert unsettled(wants, {}, lambda index, home: True) == [3, 9]
    # Free addresses are few and a destroy may have unwired one: looked at every time.
    assert unsettled(wants, dict(wants), lambda index, home: True) == [3]


def test_a_changed_want_or_a_launcher_taken_is_looked_at_again() -> None:
    settled = {9: ("m9", Path("/m9")), 10: ("m10", None), 12: ("m12", Path("/m12"))}
    wants = {3: ("m3", None),           # a create took the free address
             9: ("m9", Path("/m9")),    # unchanged, but a start took its launcher
             10: ("m10", None),         # unchanged
             11: ("m11", None),         # a machine newly at rest
             12: ("m12", Path("/m12"))}  # its launcher bound no directory (not made then)
    held = {10: None, 12: None}
    assert unsettled(wants, settled, lambda i, home: i in held and held[i] == home) \
        == [3, 9, 11, 12]
    # A machine destroyed and another created at its address between two passes:
    assert unsettled({10: ("m13", None)}, settled, lambda index, home: True) == [10]


def test_wants_list_free_addresses_first() -> None:
    assert list(wants_of(Listed([5, 6], {2: ("m2", None)}))) == [5, 6, 2]
    assert wants_of(Listed([5], {})) == {5: (None, None)}


class Counting(Recording):
    """Records which addresses each pass checks; everything asked is wired at once."""

    def __init__(self) -> None:
        super().__init__(set())
        self.checked: list[int] = []

    def ready(self, index: int) -> bool:
        self.checked.append(index)
        return super().ready(index)

    async def prewarm(self, indexes: list[int]) -> None:
        await super().prewarm(indexes)
        self.wired |= set(indexes)


async def test_a_pass_looks_only_at_what_changed_until_the_full_check() -> None:
    network, drives, now = Counting(), Drives(), [0.0]
    drives.done.set()
    spares = Listed([3, 4], {i: (f"m{i}", None) for i in range(10, 200)})
    task = asyncio.create_task(wire_ahead(network, spares, drives, NullDriver(),
                                          clock=lambda: now[0]))

    async def one_pass() -> list[int]:
        network.prewarmed.clear()
        drives.spares_changed.set()
        async with asyncio.timeout(5):
            while drives.spares_changed.is_set() or not network.prewarmed:
                await asyncio.sleep(0.001)
        return network.prewarmed[-1]

    try:
        assert await one_pass() == [3, 4, *range(10, 200)]
        spares.free_list, spares.rest = [4, 5], {3: ("m3", None), **spares.rest}  # a create took 3
        network.checked.clear()
        assert await one_pass() == [4, 5, 3]
        assert len(network.checked) < 10  # not one check per machine at rest
        now[0] = FULL_CHECK
        assert await one_pass() == [4, 5, 3, *range(10, 200)]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_stored_spares_work_out_each_machines_home_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "worker.db")
    asked: list[str] = []

    def home(mid: str, ip: str | None) -> Path:
        asked.append(mid)
        return tmp_path / mid

    def rest(mid: str, index: int, state: str = "stopped") -> None:
        with store.tx() as conn:
            conn.execute(
                "INSERT INTO machines (id, app, name, region, state, instance_id, config, "
                "millicpus, memory_mb, ip_index, private_ip, netns, created_at, updated_at) "
                "VALUES (?, 'a', ?, 'ams', ?, 'i', '{}', 0, 0, ?, ?, ?, 0, 0)",
                (mid, mid, state, index, f"10.0.0.{index}", f"ns{index}"))

    try:
        spares = StoredSpares(Recording(set()), store, home)
        rest("m2", 2)
        rest("m5", 5, state="started")  # not at rest: its launcher ran
        assert spares.free() == [3, 4]
        assert spares.at_rest() == {2: ("m2", tmp_path / "m2")}
        rest("m3", 3, state="created")
        assert spares.at_rest() == {2: ("m2", tmp_path / "m2"), 3: ("m3", tmp_path / "m3")}
        assert asked == ["m2", "m3"]  # m2's home was not worked out again
    finally:
        store.close()


async def test_a_full_look_comes_on_time_with_nothing_changed() -> None:
    network, drives = Counting(), Drives()
    drives.done.set()
    spares = Listed([3], {i: (f"m{i}", None) for i in range(10, 13)})
    task = asyncio.create_task(wire_ahead(network, spares, drives, NullDriver(),
                                          full_check=0.05))
    try:
        async with asyncio.timeout(5):
            while len(network.prewarmed) < 2:  # the first pass, then one nobody asked for
                await asyncio.sleep(0.005)
        assert network.prewarmed[:2] == [[3, 10, 11, 12]] * 2
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
