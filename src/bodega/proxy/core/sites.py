"""The certificates this proxy serves, opened from the registry's ``certificates`` rows.

Each row holds a hostname's chain in clear and its key sealed with the
cluster's certificates key (``BODEGA_CERTS_KEY``: brokers and proxies hold
it, workers never do). A row that does not open (another cluster's key, a
damaged row) is logged and skipped: the other certificates are still served.
The routing table learns each hostname's app, so ``www.example.com`` reaches
its app on either data plane; the HAProxy data plane follows ``on_change``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydantic import ValidationError

from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.haproxy.core.edge import Site
from bodega.runtime.secretbox import SecretBox, SecretUnreadable
from bodega.wire.internal.certificates import CertificateRow

log = logging.getLogger("bodega.proxy.sites")


class SiteStore:
    def __init__(self, box: SecretBox | None, table: RoutingTable) -> None:
        self.box = box
        self.table = table
        self.sites: dict[str, Site] = {}  # hostname -> what is served for it
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def put(self, key: str, doc: object) -> None:
        """A ``certificates`` row changed (None: removed); validated here."""
        hostname = key.partition("/")[2]
        old = self.sites.pop(hostname, None)
        site = self._open(key, doc) if doc is not None else None
        if site is not None:
            self.sites[hostname] = site
        if site != old:
            self.table.set_hostnames({h: s.app for h, s in self.sites.items()})
            for listener in self._listeners:
                listener()

    def _open(self, key: str, doc: object) -> Site | None:
        if self.box is None:
            log.warning("certificate %s: this proxy has no certificates key "
                        "(BODEGA_CERTS_KEY), so it cannot serve it", key)
            return None
        try:
            row = CertificateRow.model_validate(doc)
            private_key = self.box.open(row.app, row.hostname, row.sealed_key)
        except (ValidationError, SecretUnreadable) as exc:
            log.warning("certificate %s is not served: %s", key, exc)
            return None
        return Site(row.hostname, row.app, row.fingerprint,
                    private_key.strip() + "\n" + row.chain.strip() + "\n")
