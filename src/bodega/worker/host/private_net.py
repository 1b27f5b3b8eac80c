"""This host's part of the private network: machines' IPv6 addresses, the fence between
networks, the resolver and the overlay to other hosts (``bodega.networking``).

On top of ``NetnsNetwork``: its bridge gets the host's gateway address in the
host's block and the resolver's address; each machine's ``eth0`` gets its
private address (``Layout.machine``: this host, its app's network, its address
index, so it is the same after every restart) and a default route through the
gateway. The app's network is read from the registry view (apps are fixed to
one at creation); a machine whose app has not reached this host's view yet
waits for it a few seconds, then fails to start with a message saying so.

Machines see the resolver as their only nameserver: the process driver binds
a ``resolv.conf`` naming it over ``/etc/resolv.conf`` in the machine's mount
namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from bodega.model.answer import from_doc
from bodega.model.rows import AppRow, IpAssignmentRow, OverlayAdvert, WorkerRow, read_rows
from bodega.networking import netlink, nftables
from bodega.networking.commands import CommandFailed, run
from bodega.networking.core.directory import FLYCAST_TYPE, app_network, directory
from bodega.networking.core.names import Directory
from bodega.networking.core.peers import wanted
from bodega.networking.core.rules import Fence, removal, ruleset, table_name
from bodega.networking.core.sixpn import Layout, cluster_prefix, host_field, network_field
from bodega.networking.flycast import PORT as FLYCAST_PORT
from bodega.networking.flycast import FlycastRelay
from bodega.networking.overlay import Overlay, OverlaySpec, interface_name, table_of
from bodega.networking.resolver import Resolver, host_upstreams, serve
from bodega.worker.core.records import MachineRow
from bodega.worker.host.netns import NetnsNetwork

log = logging.getLogger("bodega.worker.private")

APP_WAIT = 5.0  # seconds a start waits for its app's row to reach this host's view
PEER_SYNC = 0.25  # seconds between two looks at the workers' rows and membership


class View(Protocol):
    """What this needs of the registry node."""

    def get(self, table: str, key: str) -> Mapping[str, Any] | None: ...

    def rows(self, table: str, /, **filters: str | int) -> Sequence[Mapping[str, Any]]: ...

    def members(self) -> Sequence[Member]: ...


class Member(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def status(self) -> str: ...


class PrivateNetwork:
    def __init__(self, *, network: NetnsNetwork, cluster_id: str, name: str, region: str,
                 data_dir: Path, resolv_conf: Path, endpoint_host: str, wireguard_port: int,
                 flycast_proxy: tuple[str, int] | None = None) -> None:
        self.network = network
        self.name = name
        self.region = region
        self.layout = Layout(cluster_prefix(cluster_id))
        self.host = host_field(ipaddress.IPv4Network(network.subnet))
        self.resolv_conf = resolv_conf
        wg = interface_name(cluster_id, self.host)
        self.overlay = Overlay(OverlaySpec(
            interface=wg, key_dir=data_dir / "wireguard", listen_port=wireguard_port,
            endpoint=f"{endpoint_host}:{wireguard_port}",
            block=str(self.layout.host_block(self.host)), cluster=str(self.layout.prefix),
            bridge=network.bridge, table=table_of(self.host)))
        self.fence = Fence(table_name(cluster_id, self.host), self.layout, network.bridge,
                           network.names.veth_prefix(network.subnet) + "*", wg,
                           (FLYCAST_PORT,) if flycast_proxy else ())
        self.flycast = FlycastRelay(self.layout, flycast_proxy) if flycast_proxy else None
        self.view: View | None = None
        self.networks: set[int] = set()
        self._fence_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._dns: asyncio.DatagramTransport | None = None
        self.resolver: Resolver | None = None

    # -- addresses ---------------------------------------------------------------------------
    def network_of(self, app: str) -> str | None:
        row = from_doc(AppRow, self.view.get("apps", app) if self.view is not None else None)
        return app_network(row) if row is not None else None

    def address(self, app: str, index: int | None) -> str | None:
        """A machine's private address; None while its app's network is unknown here."""
        key = self.network_of(app)
        if key is None or index is None:
            return None
        return str(self.layout.machine(self.host, network_field(key), index))

    def published(self, row: MachineRow) -> dict[str, str]:
        """What a machine's registry row adds: its private address and network."""
        address = self.address(row.app, row.ip_index)
        key = self.network_of(row.app)
        return {} if address is None or key is None else {"private_ip": address, "network": key}

    async def attach(self, app: str, index: int, netns: str) -> str:
        """Give the machine in ``netns`` its private address; the address."""
        for _ in range(int(APP_WAIT / 0.1)):
            if self.network_of(app) is not None:
                break
            await asyncio.sleep(0.1)
        key = self.network_of(app)
        if key is None:
            raise LookupError(f"app {app} has not reached this host's view of the registry: "
                              "its private network is unknown; try the start again")
        field = network_field(key)
        if field not in self.networks:  # its rule first: the fence fails closed
            await self.apply_fence(self.networks | {field})
        address = self.layout.machine(self.host, field, index)
        gateway = self.layout.gateway(self.host)
        # Made as the namespace was wired (no thread to wait for), else made now.
        link = self.network.take_link(index) or await netlink.open_link(netns)
        try:
            await link.give(address, gateway)
        finally:
            link.close()
        return str(address)

    # -- the host's part ---------------------------------------------------------------------
    async def start(self, view: View, machines: Iterable[MachineRow]) -> None:
        """Set the host up; ``machines``: those already here (a restart), whose networks
        stay let through."""
        self.view = view
        keys = {self.network_of(row.app) for row in machines}
        self.networks |= {network_field(key) for key in keys if key is not None}
        bridge = self.network.bridge
        await asyncio.to_thread(_forwarding)
        await run("ip", "-6", "addr", "replace", f"{self.layout.gateway(self.host)}/64",
                  "dev", bridge, "nodad")
        await run("ip", "-6", "addr", "replace", f"{self.layout.resolver()}/128", "dev", bridge,
                  "nodad")
        self.resolv_conf.write_text(f"nameserver {self.layout.resolver()}\n"
                                    "options timeout:2 attempts:2\n")
        self.resolv_conf.chmod(0o644)
        await self.apply_fence()
        await self.overlay.start()
        await self.apply_fence()  # now naming the overlay's interface
        resolver = Resolver(self.layout, self.region, self._directory,
                            upstreams=host_upstreams(_host_resolv_conf()))
        self.resolver = resolver
        self._dns = await serve(resolver, str(self.layout.resolver()))
        self._tasks.append(asyncio.create_task(self._follow_peers()))
        log.info("private network: block %s, overlay %s, resolver %s",
                 self.overlay.spec.block, self.overlay.spec.interface, self.layout.resolver())

    def _directory(self) -> Directory:
        view = self.view
        assert view is not None
        return directory(view.rows("machines", state="started"),
                         read_rows(AppRow, view.rows("apps")),
                         read_rows(IpAssignmentRow, view.rows("ip_assignments")),
                         self.layout,
                         self.flycast.servers if self.flycast is not None else ())

    async def apply_fence(self, networks: set[int] | None = None) -> None:
        """Write the fence for ``networks`` (default: the current ones); they are the current
        ones once it is in."""
        async with self._fence_lock:
            wanted = set(self.networks if networks is None else networks) | self.networks
            await nftables.apply(ruleset(self.fence, wanted))
            self.networks = wanted

    async def _follow_peers(self) -> None:
        """Every ``PEER_SYNC``: the peers the view wants, on an overlay brought up again
        first if it is gone (``Overlay.sync``), and the Flycast addresses."""
        while True:
            try:
                view = self.view
                if view is not None:
                    statuses = {m.name: str(m.status) for m in view.members()}
                    await self.overlay.sync(wanted(read_rows(WorkerRow, view.rows("workers")),
                                                  statuses, self.name))
                    await self._follow_flycast(view)
            except Exception:
                log.exception("updating the overlay's peers failed")
            await asyncio.sleep(PEER_SYNC)

    async def _follow_flycast(self, view: View) -> None:
        """Serve every Flycast address of the view on the bridge (their rows come and go)."""
        if self.flycast is None:
            return
        held = set(self.flycast.servers)
        wanted_ips = {row.ip: row.app
                      for row in read_rows(IpAssignmentRow, view.rows("ip_assignments"))
                      if row.type == FLYCAST_TYPE and self.layout.fields(row.ip)}
        for ip in sorted(set(wanted_ips) - held):
            await run("ip", "-6", "addr", "replace", f"{ip}/128", "dev", self.network.bridge,
                      "nodad")
        await self.flycast.serve(wanted_ips)
        for ip in sorted(held - set(wanted_ips)):
            await run("ip", "-6", "addr", "del", f"{ip}/128", "dev", self.network.bridge,
                      check=False)

    def advertised(self) -> OverlayAdvert | None:
        return self.overlay.advertised() if self.overlay.public_key else None

    async def stop(self, *, machines_stay: bool) -> None:
        """Stop answering and following peers. While machines stay (to be re-adopted), the
        fence and the overlay stay too: they keep isolation and cross-host traffic going
        until the next start takes them over."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._dns is not None:
            self._dns.close()
        if self.flycast is not None:
            self.flycast.close()
        if machines_stay:
            log.info("private network: fence and overlay %s left for the machines that stay",
                     self.overlay.spec.interface)
            return
        await self.overlay.stop()
        with contextlib.suppress(CommandFailed):
            await nftables.apply(removal(self.fence.table))


def _forwarding() -> None:
    for path in ("/proc/sys/net/ipv6/conf/all/forwarding", "/proc/sys/net/ipv4/ip_forward"):
        Path(path).write_text("1\n")


def _host_resolv_conf() -> str:
    try:
        return Path("/etc/resolv.conf").read_text()
    except OSError:
        return ""
