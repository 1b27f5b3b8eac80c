"""Spare namespaces and parked launchers, kept ready before the creates that take them.

The next ``WIRE_AHEAD`` free addresses keep a wired namespace, each with a launcher
parked in it, so a create rarely waits for ``ip`` or for a process to join its cgroups.
Machines at rest keep theirs too, so their next start (a proxy's wake) is quick; after
a cluster's restart, which swept every namespace, they get theirs back here, off the
request path.

The work waits for the starts under way to end first (``Lifecycle.after_drives``): each
``ip`` and each launcher is a process the worker spawns, and spawning one from the
worker's event loop holds the loop for milliseconds; done in the middle of a start, it
delays that start's spawn.
"""

from __future__ import annotations

import logging

from bodega.worker.drivers.base import Driver
from bodega.worker.host.network import WIRE_AHEAD, Network
from bodega.worker.ops.lifecycle import Lifecycle
from bodega.worker.store import queries
from bodega.worker.store.database import Store

log = logging.getLogger("bodega.worker")

AFTER_DRIVES = 0.5  # the longest the spares wait for the operations under way


async def wire_ahead(network: Network, store: Store, lifecycle: Lifecycle,
                     driver: Driver) -> None:
    """Whenever an address is taken or given back, or a machine comes to rest: wire the
    spares, and park a launcher in each spare and each resting machine's namespace."""
    first, last = network.index_range
    changed = lifecycle.spares_changed
    changed.set()
    while True:
        await changed.wait()
        await lifecycle.after_drives(AFTER_DRIVES)
        changed.clear()
        try:
            indexes = queries.free_ip_indexes(store.db, first, last, WIRE_AHEAD)
            idle = queries.idle_ip_indexes(store.db)
            await network.prewarm([*indexes, *idle])
            parking = driver.capabilities.parking
            if parking is not None:
                for index in [*indexes, *idle]:
                    namespace = network.namespace(index)
                    if namespace is not None and network.ready(index):
                        parking.park(namespace)
        except Exception:
            log.exception("wiring networks ahead failed")
