"""A worker's background upkeep, off every request's path: networks wired ahead of the
machines that will want them, and the housekeeping of its ledger and log.

The next ``WIRE_AHEAD`` free addresses keep a wired namespace, each with a launcher
parked in it, so a create rarely waits for ``ip`` or for a process to join its cgroups.
Machines at rest keep theirs too, so their next start (a proxy's wake) is quick; after
a cluster's restart, which swept every namespace, they get theirs back here, off the
request path.

The wiring waits for the starts under way to end first (``Lifecycle.after_drives``):
each ``ip`` and each launcher is a process the worker spawns, and spawning one from the
worker's event loop holds the loop for milliseconds; done in the middle of a start, it
delays that start's spawn.

A pass looks at the few free addresses every time, and at a machine at rest's only when
its want changed since a pass left it wired and parked, or its launcher is gone or waits
for another directory (a start took it; ``unsettled``): checking a namespace and its
launcher costs a handful of system calls, and a worker holding hundreds of machines at
rest would otherwise spend milliseconds of its event loop per machine on every create,
start and stop. Every ``FULL_CHECK`` seconds, changed or not, a pass looks at them all
again, so one broken from outside (a namespace deleted by hand, a launcher killed) is
wired and parked again ahead of its start; a start never relies on it (``attach``
rewires, ``Parking.take`` refuses a stale launcher).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from bodega.runtime.waits import within
from bodega.worker.drivers.base import Driver
from bodega.worker.host.network import WIRE_AHEAD, Network
from bodega.worker.store import queries
from bodega.worker.store.database import Store
from bodega.worker.store.ledger import Ledger

log = logging.getLogger("bodega.worker")

HOUSEKEEPING_INTERVAL = 2.0
COMPACTION_INTERVAL = 3600.0
AFTER_DRIVES = 0.5  # the longest the spares wait for the operations under way
FULL_CHECK = 30.0  # how often a pass looks again at addresses it left settled


class Drives(Protocol):
    """What the spares follow of the lifecycle (``ops/lifecycle.py``)."""

    spares_changed: asyncio.Event

    async def after_drives(self, timeout: float) -> None: ...


# What the upkeep wants at an address: the machine at rest there (None: a free address,
# wired for the next create) and the directory its launcher binds ahead (``parking.py``),
# None when its machine runs as the worker's user.
Want = tuple[str | None, Path | None]
Home = Callable[[str, str | None], Path | None]  # (machine id, private address) -> its home


class Spares(Protocol):
    """The addresses to keep wired."""

    def free(self) -> list[int]:
        """The next free addresses, in the order creates take them."""
        ...

    def at_rest(self) -> dict[int, Want]:
        """The machines at rest, by address."""
        ...


class StoredSpares:
    """``Spares`` as the worker's store says: the next ``WIRE_AHEAD`` free addresses, and
    the machines at rest. Each machine's home is worked out once (it follows from its id
    and address alone), not on every pass."""

    def __init__(self, network: Network, store: Store, home: Home) -> None:
        self.first, self.last = network.index_range
        self.store = store
        self.home = home
        self._homes: dict[tuple[str, str | None], Path | None] = {}

    def free(self) -> list[int]:
        return queries.free_ip_indexes(self.store.db, self.first, self.last, WIRE_AHEAD)

    def at_rest(self) -> dict[int, Want]:
        rows = queries.idle_addresses(self.store.db)
        known, self._homes = self._homes, {}
        for _index, mid, ip in rows:
            key = (mid, ip)
            self._homes[key] = known[key] if key in known else self.home(mid, ip)
        return {index: (mid, self._homes[mid, ip]) for index, mid, ip in rows}


def wants_of(spares: Spares) -> dict[int, Want]:
    """Every address to keep wired, free ones first (the order creates take them)."""
    return {**{index: (None, None) for index in spares.free()}, **spares.at_rest()}


def unsettled(wants: Mapping[int, Want], settled: Mapping[int, Want],
              holds: Callable[[int, Path | None], bool]) -> list[int]:
    """The addresses a pass must look at: every free one (a few; a destroy may have
    unwired one a pass left wired, between two passes), and each machine at rest's that no
    pass has left wired and parked for it (newly at rest, another machine at a destroyed
    one's address) or whose launcher is gone or bound no directory, or another (a start
    took it; its home was not made yet). In the order of ``wants``."""
    return [index for index, want in wants.items()
            if want[0] is None or settled.get(index) != want or not holds(index, want[1])]


async def wire_ahead(network: Network, spares: Spares, drives: Drives,
                     driver: Driver, clock: Callable[[], float] = time.monotonic,
                     full_check: float = FULL_CHECK) -> None:
    """Whenever an address is taken or given back, or a machine comes to rest: wire the
    ``spares``, and park a launcher in each one's namespace.

    While a free address is still wired for the next create, this waits for the starts
    under way; once none is (a burst of creates took them all), it wires at once: the
    next create would otherwise wire its own on its way to the spawn."""
    changed = drives.spares_changed
    changed.set()
    parking = driver.capabilities.parking

    def holds(index: int, home: Path | None) -> bool:
        """Nothing to hold here, or a launcher is parked in the namespace, with ``home``
        bound (what this process remembers)."""
        namespace = network.namespace(index)
        return parking is None or namespace is None or parking.holds(namespace, home)

    settled: dict[int, Want] = {}
    checked_all = -math.inf
    while True:
        with contextlib.suppress(TimeoutError):  # a full look, changed or not
            await within(changed.wait(), max(0.0, checked_all + full_check - clock()))
        try:
            if any(network.ready(index) for index in spares.free()):
                await drives.after_drives(AFTER_DRIVES)
            changed.clear()
            wants = wants_of(spares)
            if clock() - checked_all >= full_check:
                settled, checked_all = {}, clock()
            todo = unsettled(wants, settled, holds)
            settled = {index: want for index, want in wants.items()
                       if index in settled and index not in todo}
            await network.prewarm(todo)
            for index in todo:
                namespace = network.namespace(index)
                if not network.ready(index):
                    continue  # not wired: the next pass tries again
                if namespace is not None and parking is not None:
                    # A launcher waits, already in cgroups, in each spare namespace and in
                    # each of a machine at rest.
                    await parking.clear()
                    parking.park(namespace, wants[index][1])
                if holds(index, wants[index][1]):
                    settled[index] = wants[index]
        except Exception:
            changed.clear()
            log.exception("wiring networks ahead failed")


async def housekeeping(store: Store, ledger: Ledger, log_keep_seconds: float) -> None:
    """Expired reservations purged every few seconds; old step records compacted hourly."""
    next_compaction = 0.0
    while True:
        await asyncio.sleep(HOUSEKEEPING_INTERVAL)
        try:
            now = store.clock()
            ledger.purge(now - 60)
            if now >= next_compaction:
                next_compaction = now + COMPACTION_INTERVAL
                dropped = store.compact(now - log_keep_seconds)
                if dropped:
                    log.info("compacted the log: %d old step records dropped", dropped)
        except Exception:
            log.exception("housekeeping failed")
