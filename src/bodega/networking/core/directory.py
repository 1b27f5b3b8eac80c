"""The resolver's snapshot of the registry view, and whose network an asker is in; pure.

The view's rows: machines (written by their workers, with the private address the
worker gave them), apps (``AppRow``: with their organization and network) and Flycast
assignments. ``directory`` keeps what names need, typed.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

from bodega.model.rows import AppRow, IpAssignmentRow
from bodega.networking.core.names import Directory, Machine
from bodega.networking.core.sixpn import Layout, network_field, network_key

STARTED = "started"
FLYCAST_TYPE = "private_v6"  # an ip_assignments row in the cluster's /48: a Flycast address


def app_network(row: AppRow) -> str:
    """An app row's network key (``<org>/<network>``)."""
    return network_key(row.org_slug or "personal", row.network)


def directory(machines: Iterable[Mapping[str, Any]], apps: Iterable[AppRow],
              assignments: Iterable[IpAssignmentRow], layout: Layout,
              served: Container[str] = ()) -> Directory:
    """What names need of the view. A Flycast address is kept only once it is in ``served``
    (those this host answers on): a name resolving before its address answers would send
    a machine that asks at once into a refused connection."""
    found = []
    for doc in machines:
        address = str(doc.get("private_ip") or "")
        if doc.get("state") != STARTED or layout.fields(address) is None:
            continue
        metadata = (doc.get("config") or {}).get("metadata") or {}
        group = metadata.get("fly_process_group")
        found.append(Machine(id=str(doc["id"]), app=str(doc.get("app", "")),
                             region=str(doc.get("region", "")), address=address,
                             group=str(group) if group else None))
    flycast: dict[str, list[str]] = {}
    for row in assignments:
        if row.type == FLYCAST_TYPE and layout.fields(row.ip) and row.ip in served:
            flycast.setdefault(row.app, []).append(row.ip)
    return Directory(
        machines=tuple(found),
        networks={row.name: app_network(row) for row in apps if row.name},
        flycast={app: tuple(sorted(ips)) for app, ips in flycast.items()})


def asker_network(address: str, directory: Directory, layout: Layout) -> str | None:
    """The network key of the machine at ``address``: the one whose field its address carries;
    None for an address outside the cluster's private network or of no known network."""
    fields = layout.fields(address)
    if fields is None or fields.host == 0:
        return None
    keys = sorted({key for key in directory.networks.values()
                   if network_field(key) == fields.network})
    return keys[0] if keys else None
