"""A worker's background upkeep, off every request's path: networks wired ahead of the
machines that will want them, and the housekeeping of its ledger and log."""

from __future__ import annotations

import asyncio
import logging

from bodega.worker.drivers.base import Driver
from bodega.worker.host.network import WIRE_AHEAD, Network
from bodega.worker.ops.machines import MachineService
from bodega.worker.store import queries
from bodega.worker.store.database import Store
from bodega.worker.store.ledger import Ledger

log = logging.getLogger("bodega.worker")

HOUSEKEEPING_INTERVAL = 2.0
COMPACTION_INTERVAL = 3600.0


async def wire_ahead(store: Store, network: Network, machines: MachineService,
                     driver: Driver) -> None:
    """Keep the next machines' networks (and launchers) ready before they are asked for;
    machines at rest keep one too (their next start, a wake, is quick)."""
    first, last = network.index_range
    changed = machines.spares_changed
    changed.set()
    while True:
        await changed.wait()
        changed.clear()
        try:
            indexes = queries.free_ip_indexes(store.db, first, last, WIRE_AHEAD)
            idle = queries.idle_ip_indexes(store.db)
            await network.prewarm([*indexes, *idle])
            parking = driver.capabilities.parking
            if parking is not None:
                # A launcher waits, already in cgroups, in each spare namespace and in each
                # of a machine at rest.
                for index in [*indexes, *idle]:
                    namespace = network.namespace(index)
                    if namespace is not None and network.ready(index):
                        parking.park(namespace)
        except Exception:
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
