"""Apps: shared rows of the view that any broker may write (last writer wins).

An app is a name that machines, volumes and tokens hang off. Names are DNS
labels, unique cluster-wide; two brokers creating the same name in the same
instant both succeed and the view keeps one (there is no consensus to ask),
which is harmless: an app row carries nothing but its name and org.
"""

from __future__ import annotations

import hashlib
import time

from bodega.broker.view.catalog import Catalog
from bodega.model.errors import BadRequest, NotFound, Unprocessable
from bodega.model.ids import NAME_RE
from bodega.model.rows import AppRow
from bodega.networking.core.sixpn import network_field, network_key
from bodega.wire.public.apps import App, Organization


class Apps:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def require(self, name: str) -> AppRow:
        row = self.catalog.get(AppRow, name)
        if row is None:
            raise NotFound(f"app not found: {name}")
        return row

    def create(self, name: str | None, org_slug: str | None, network: str | None) -> AppRow:
        if not name:
            raise BadRequest("invalid_argument: app_name (or name) is required")
        if not org_slug:
            raise BadRequest('invalid_argument: org_slug is required (the organization slug, '
                             'e.g. "personal")')
        if not NAME_RE.match(org_slug):
            raise BadRequest(f"invalid_argument: org_slug {org_slug!r}: use lowercase letters, "
                             "digits and -")
        if not NAME_RE.match(name):
            raise BadRequest(f"invalid_argument: app name {name!r}: use lowercase letters, digits "
                             "and -, starting and ending with a letter or digit, at most 63")
        if self.catalog.get(AppRow.TABLE, name) is not None:
            raise Unprocessable(f"app name {name!r} is already taken", status="name_taken")
        if network is not None and not NAME_RE.match(network):
            raise BadRequest(f"invalid_argument: network {network!r}: use lowercase letters, "
                             "digits and -, as for an app name")
        self._refuse_a_network_clash(network_key(org_slug, network))
        row = AppRow(id=hashlib.sha256(name.encode()).hexdigest()[:12], name=name,
                     org_slug=org_slug, network=network or "default", created_at=time.time())
        self.catalog.put_shared(AppRow.TABLE, name, row.doc())
        return row

    def _refuse_a_network_clash(self, key: str) -> None:
        """Two networks whose addresses carry the same field would share their machines'
        packets and names: the later one is refused (one in 65,536 pairs)."""
        for other_row in self.catalog.rows(AppRow):
            other = network_key(other_row.org_slug, other_row.network)
            if other != key and network_field(other) == network_field(key):
                raise Unprocessable(f"network {key} cannot be told apart from network {other} "
                                    "in private addresses; choose another network name",
                                    status="network_clash")

    def delete(self, name: str) -> None:
        self.require(name)
        self.catalog.delete_shared(AppRow.TABLE, name)

    def names(self, org_slug: str | None = None) -> list[str]:
        rows = self.catalog.rows(AppRow, org_slug=org_slug) if org_slug else \
            self.catalog.rows(AppRow)
        return sorted(r.name for r in rows)

    @staticmethod
    def answer(row: AppRow, machine_count: int, volume_count: int, status: str) -> App:
        """The App object as the Machines API shows it (``status`` from its releases)."""
        return App(id=row.id or row.name, name=row.name, status=status,
                   organization=Organization(name=row.org_slug, slug=row.org_slug),
                   network=row.network, machine_count=machine_count,
                   volume_count=volume_count)
