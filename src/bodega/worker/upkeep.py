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
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from bodega.worker.drivers.base import Driver
from bodega.worker.host.network import WIRE_AHEAD, Network
from bodega.worker.store import queries
from bodega.worker.store.database import Store
from bodega.worker.store.ledger import Ledger

log = logging.getLogger("bodega.worker")

HOUSEKEEPING_INTERVAL = 2.0
COMPACTION_INTERVAL = 3600.0
AFTER_DRIVES = 0.5  # the longest the spares wait for the operations under way


class Drives(Protocol):
    """What the spares follow of the lifecycle (``ops/lifecycle.py``)."""

    spares_changed: asyncio.Event

    async def after_drives(self, timeout: float) -> None: ...


# The next free addresses; those of machines at rest, each with the directory its machine
# starts in when it runs as its own user (its next launcher binds it ahead: ``parking.py``).
Spares = tuple[list[int], dict[int, Path | None]]
Home = Callable[[str, str | None], Path | None]  # (machine id, private address) -> its home


def wanted(network: Network, store: Store, home: Home) -> Callable[[], Spares]:
    """The addresses to keep wired: the next free ones, and those of machines at rest."""
    first, last = network.index_range

    def indexes() -> Spares:
        return (queries.free_ip_indexes(store.db, first, last, WIRE_AHEAD),
                {index: home(mid, ip) for index, mid, ip in queries.idle_addresses(store.db)})

    return indexes


async def wire_ahead(network: Network, spares: Callable[[], Spares], drives: Drives,
                     driver: Driver) -> None:
    """Whenever an address is taken or given back, or a machine comes to rest: wire the
    ``spares``, and park a launcher in each one's namespace.

    While a free address is still wired for the next create, this waits for the starts
    under way; once none is (a burst of creates took them all), it wires at once: the
    next create would otherwise wire its own on its way to the spawn."""
    changed = drives.spares_changed
    changed.set()
    while True:
        await changed.wait()
        try:
            if any(network.ready(index) for index in spares()[0]):
                await drives.after_drives(AFTER_DRIVES)
            changed.clear()
            free, idle = spares()
            indexes = [*free, *idle]
            await network.prewarm(indexes)
            parking = driver.capabilities.parking
            if parking is not None:
                # A launcher waits, already in cgroups, in each spare namespace and in each
                # of a machine at rest.
                for index in indexes:
                    namespace = network.namespace(index)
                    if namespace is not None and network.ready(index):
                        await parking.clear()
                        parking.park(namespace, idle.get(index))
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
