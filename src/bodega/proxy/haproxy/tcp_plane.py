"""TCP services on the HAProxy data plane: the listeners' layout, kept beside the HTTP one.

``step`` is the pure plan (``tcp_layout.tcp_plan``) from the TCP table; a
plan that needs a reload first gets an activator for each new listener (its
loopback port goes in the config), then the data plane renders and reloads.
"""

from __future__ import annotations

import logging

from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.core.tcp_routes import TcpTable
from bodega.proxy.haproxy.core.layout import server_name, wanted_servers
from bodega.proxy.haproxy.core.tcp_layout import (
    TCP_EMPTY,
    TcpLayout,
    TcpPlan,
    render_tcp,
    tcp_backend,
    tcp_far_backend,
    tcp_plan,
)
from bodega.proxy.tcp_activator import TcpActivator

log = logging.getLogger("bodega.proxy.haproxy")


class TcpPlane:
    def __init__(self, tcp: TcpTable, activator: TcpActivator, table: RoutingTable,
                 region: str, bind_host: str) -> None:
        self.tcp = tcp
        self.activator = activator
        self.table = table
        self.region = region
        self.bind_host = bind_host
        self.layout: TcpLayout = TCP_EMPTY

    def step(self) -> TcpPlan:
        listeners = self.tcp.listeners()
        wanted = wanted_servers([str(p) for p in listeners],
                                lambda port: self.tcp.backends(int(port)),
                                self.table.worker_alive, self.region)
        return tcp_plan(self.layout, listeners, {int(p): s for p, s in wanted.items()})

    async def prepare(self, plan: TcpPlan) -> None:
        """Activators for the plan's listeners, before HAProxy is told of them."""
        if dict(plan.layout.listeners) != dict(self.layout.listeners):
            for port, apps in self.tcp.conflicts().items():
                log.warning("port %d is %s's: %s asked for it too and are not served on it",
                            port, plan.layout.listeners[port].app, ", ".join(apps))
            log.info("tcp listeners: %s", ", ".join(
                f"{p} ({spec.app})" for p, spec in plan.layout.listeners.items()) or "none")
        await self.activator.ensure(set(plan.layout.listeners))
        self.layout = plan.layout

    def servers(self) -> dict[tuple[str, str], str]:
        """(backend, server) -> the machine in that slot, for HAProxy's counters."""
        return {(name(port), server_name(i)): spec.machine_id
                for name, tier in ((tcp_backend, self.layout.slots),
                                   (tcp_far_backend, self.layout.far))
                for port, slots in tier.items()
                for i, spec in enumerate(slots) if spec is not None}

    def render(self, crt_list: str | None) -> list[str]:
        return render_tcp(self.layout, self.bind_host, crt_list, self.activator.ports())
