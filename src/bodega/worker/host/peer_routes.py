"""Routes to the machine subnets of workers on other hosts, kept as the view changes.

The shell of ``core/peer_routes.py``: every few seconds it reads the
``workers`` rows of this worker's registry replica, decides the routes, and
makes the kernel's agree (``ip route replace SUBNET via HOST`` for one that
is missing or goes elsewhere; a route it made to a worker no longer listed is
deleted). Only a worker whose machines have addresses of their own (netns)
runs it; every such worker of a host keeps the same routes, so one stopping
takes nothing from the others: routes are left as they are when it stops (a
route to another host's subnet carries nothing without that host).
"""

from __future__ import annotations

import asyncio
import logging

from bodega.model.rows import WorkerRow
from bodega.registry import Registry
from bodega.worker.core.peer_routes import wanted_routes
from bodega.worker.host.network import NetworkError, run

log = logging.getLogger("bodega.worker")
INTERVAL = 2.0


class PeerRoutes:
    def __init__(self, node: Registry, own_host: str, interval: float = INTERVAL) -> None:
        self.node = node
        self.own_host = own_host
        self.interval = interval
        self.applied: dict[str, str] = {}

    async def sync(self) -> None:
        wanted = wanted_routes(self.own_host, self.node.rows(WorkerRow))
        if not wanted and not self.applied:
            return
        now = current_routes(await run("ip", "-4", "route", "show"))
        for subnet, via in wanted.items():
            if now.get(subnet) != via:
                await run("ip", "route", "replace", subnet, "via", via)
                log.info("machines of %s are reached through %s", subnet, via)
            self.applied[subnet] = via
        for subnet in set(self.applied) - set(wanted):
            await run("ip", "route", "del", subnet, check=False)
            del self.applied[subnet]

    async def run(self) -> None:
        while True:
            try:
                await self.sync()
            except NetworkError as exc:
                log.warning("routes to other hosts' machines: %s", exc)
            await asyncio.sleep(self.interval)


def current_routes(table: str) -> dict[str, str]:
    """{destination: via} of ``ip -4 route show``'s gateway routes."""
    found = {}
    for line in table.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] == "via":
            found[fields[0]] = fields[2]
    return found
