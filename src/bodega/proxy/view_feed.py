"""What the proxy routes on, kept from the registry's feeds: each machine row becomes its
HTTP backend, its TCP listeners and its statics, each app row a known app, each
certificate row a site the TLS edge serves."""

from __future__ import annotations

import asyncio
import logging

from bodega.model.answer import from_doc
from bodega.model.machine import Machine
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.core.sites import SiteStore
from bodega.proxy.core.statics import StaticsTable
from bodega.proxy.core.tcp_routes import TcpTable, listeners_of
from bodega.registry import Registry
from bodega.registry.membership.feed import FeedLagged
from bodega.wire.internal.certificates import TABLE as CERTIFICATES

log = logging.getLogger("bodega.proxy")

TABLES = ("machines", "apps", CERTIFICATES)


async def follow(node: Registry, table: str, routes: RoutingTable, tcp: TcpTable,
                 sites: SiteStore, statics: StaticsTable) -> None:
    """Apply every change of ``table`` as it comes, for good; a feed fallen behind is read
    again from the start."""
    while True:
        try:
            with node.subscribe(table) as feed:
                async for change in feed:
                    if table == "machines":
                        machine = from_doc(Machine, change.doc)
                        routes.put_machine(change.key, machine)
                        statics.put_machine(change.key, machine)
                        tcp.put(change.key, listeners_of(machine))
                    elif table == CERTIFICATES:
                        sites.put(change.key, change.doc)
                    else:
                        routes.put_app(change.key, change.doc is not None)
        except FeedLagged:
            log.warning("fell behind the %s feed; reading it again", table)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("following %s failed", table)
            await asyncio.sleep(1)
