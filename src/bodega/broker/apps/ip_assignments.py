"""An app's IP assignments: addresses recorded as shared rows of the view, like apps.

``POST /v1/apps/{app}/ip_assignments`` picks an address of the kind asked
for and records it; list and delete read and remove the records. In bodega
an assignment is a record only (Flycast aside, below): the proxy does not bind
these addresses (clients reach an app through the proxy's own listener), so they
are what a client that manages addresses can keep and see, not a route.

Kinds, as the Machines API names them: ``v4`` and ``v6`` (dedicated, one
new address per call), ``private_v6`` (an address in the app's private
network) and ``shared_v4`` (one address every app shares; asking twice
returns the app's record). When the cluster runs a private network
(``bodega.networking``), ``private_v6`` is the app's Flycast address: fixed by
its network and name, served by every host and answered as ``<app>.flycast``.
Dedicated addresses are drawn at random from ranges no real traffic uses (RFC
6598 for v4, unique-local for v6) and checked against the records this broker
sees; two brokers drawing the same random v4 in the same instant is the only way
two apps could share one.
"""

from __future__ import annotations

import ipaddress
import random
import time
from collections.abc import Callable, Collection

from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import Catalog
from bodega.model.errors import BadRequest, NotFound, Unavailable
from bodega.model.rows import IpAssignmentRow, WorkerRow
from bodega.networking.core.directory import app_network
from bodega.networking.core.sixpn import Layout, network_field
from bodega.wire.public.apps import IpAssignment
from bodega.wire.public.fly import AssignIpRequest

TABLE = IpAssignmentRow.TABLE
SHARED_V4 = "100.64.0.1"  # the one shared address, outside the dedicated pool below
V4_POOL = ipaddress.IPv4Network("100.64.0.0/10")
V4_FIRST = 256  # the pool's first /24 is kept for shared addresses
V6_PREFIX = ipaddress.IPv6Network("fdb0:de9a::/32")  # public-style (dedicated) addresses
PRIVATE_V6_PREFIX = ipaddress.IPv6Network("fdaa::/16")  # the private network's range
KINDS = ("v4", "v6", "private_v6", "shared_v4")
DRAWS = 64


def allocate(kind: str, taken: Collection[str], draw: Callable[[int], int]) -> str:
    """A free address of ``kind`` (``draw(n)``: a random integer in [0, n))."""
    if kind == "shared_v4":
        return SHARED_V4
    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    if kind == "v4":
        network, first = V4_POOL, V4_FIRST
    elif kind == "v6":
        network, first = V6_PREFIX, 1
    elif kind == "private_v6":
        network, first = PRIVATE_V6_PREFIX, 1
    else:
        raise BadRequest(f"invalid_argument: type {kind!r}: use one of {', '.join(KINDS)}")
    for _ in range(DRAWS):
        address = str(network[first + draw(network.num_addresses - first - 1)])
        if address not in taken:
            return address
    raise Unavailable(f"no free {kind} address found after {DRAWS} draws; retry")


def key(app: str, ip: str) -> str:
    return f"{app}/{ip}"


def answer(row: IpAssignmentRow) -> IpAssignment:
    """The IPAssignment object as the Machines API shows it."""
    return IpAssignment(ip=row.ip, region=row.region, service_name=row.service_name,
                        shared=row.shared, created_at=row.created_at)


class IpAssignments:
    def __init__(self, catalog: Catalog, apps: Apps,
                 rng: random.Random | None = None) -> None:
        self.catalog = catalog
        self.apps = apps
        self.rng = rng or random.SystemRandom()

    def _rows(self, **filters: str) -> list[IpAssignmentRow]:
        return self.catalog.rows(IpAssignmentRow, **filters)

    def list(self, app: str) -> list[IpAssignment]:
        self.apps.require(app)
        rows = self._rows(app=app)
        return [answer(r) for r in sorted(rows, key=lambda r: (str(r.created_at), r.ip))]

    def assign(self, app: str, body: AssignIpRequest) -> IpAssignment:
        self.apps.require(app)
        if body.type is None:
            raise BadRequest(f"invalid_argument: type is required: one of {', '.join(KINDS)}")
        if body.type == "shared_v4":
            held = self.catalog.get(IpAssignmentRow, key(app, SHARED_V4))
            if held is not None:
                return answer(held)
        taken = {row.ip for row in self._rows()}
        ip = self._flycast(app) if body.type == "private_v6" else None
        if ip is not None and (found := self._rows(app=app, ip=ip)):
            return answer(found[0])
        ip = ip or allocate(body.type, taken, self.rng.randrange)
        row = IpAssignmentRow(app=app, ip=ip, type=body.type, region=body.region or "global",
                    service_name=body.service_name, shared=body.type == "shared_v4",
                    network=body.network,
                    created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.catalog.put_shared(TABLE, row.key, row.doc())
        return answer(row)

    def _flycast(self, app: str) -> str | None:
        """The app's Flycast address when the cluster runs a private network (a worker's row
        names its overlay block, inside the cluster's /48); None without one."""
        for row in self.catalog.rows(WorkerRow):
            block = row.wireguard.block if row.wireguard is not None else ""
            if block:
                layout = Layout(ipaddress.IPv6Network(block).supernet(new_prefix=48))
                return str(layout.flycast(network_field(app_network(self.apps.require(app))),
                                          app))
        return None

    def remove(self, app: str, ip: str) -> None:
        self.apps.require(app)
        try:
            address = str(ipaddress.ip_address(ip))
        except ValueError:
            raise BadRequest(f"invalid_argument: {ip!r} is not an IP address") from None
        if self.catalog.get(TABLE, key(app, address)) is None:
            raise NotFound(f"ip assignment not found: {address} is not assigned to {app}")
        self.catalog.delete_shared(TABLE, key(app, address))

    def remove_all(self, app: str) -> None:
        """Drop every record of ``app`` (its delete)."""
        for row in self._rows(app=app):
            self.catalog.delete_shared(TABLE, key(app, row.ip))
