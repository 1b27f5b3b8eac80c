"""Every app's own certificate, from the cluster CA: ``<app>.<domain>`` and ``*.<app>.<domain>``.

``https://hello.localhost:8443/`` works with no ``certs add``: a broker holding
the CA issues each app a certificate for its name under the edge's domain
(with a wildcard one level down), and issues it again when a third of its
life is left. A ``*.localhost`` certificate would not do: TLS clients refuse
a wildcard with a single label under it. Brokers racing to issue the same
one write the same kind of row; the last one wins, and either serves.
"""

from __future__ import annotations

import asyncio
import datetime
import logging

from bodega.broker.certificates.store import AppCertificates
from bodega.broker.view.catalog import Catalog
from bodega.model.errors import BodegaError
from bodega.model.rows import AppRow
from bodega.runtime.tls.authority import utc_now
from bodega.wire.internal.certificates import TABLE, CertificateRequest, CertificateRow

log = logging.getLogger("bodega.broker.certificates.store")

INTERVAL = 2.0  # seconds between looks at the apps: a new app is served over TLS this soon
RENEW_LEFT = 30 * 86400.0  # seconds of life left when it is issued again


class DefaultCertificates:
    def __init__(self, catalog: Catalog, certs: AppCertificates, domain: str) -> None:
        self.catalog = catalog
        self.certs = certs
        self.domain = domain.strip(".").lower()

    def due(self, now: datetime.datetime) -> list[str]:
        """Apps whose own certificate is missing or has less than ``RENEW_LEFT`` to live."""
        out = []
        for app_row in self.catalog.rows(AppRow):
            app = app_row.name
            row = self.catalog.get(TABLE, f"{app}/{app}.{self.domain}")
            left = (CertificateRow.model_validate(row).not_after - now).total_seconds() \
                if row is not None else 0.0
            if app and left < RENEW_LEFT:
                out.append(app)
        return sorted(out)

    def ensure(self) -> int:
        issued = 0
        for app in self.due(utc_now()):
            hostname = f"{app}.{self.domain}"
            try:
                self.certs.add(app, CertificateRequest(hostname=hostname),
                               also=(f"*.{hostname}",))
            except BodegaError as exc:  # a name that is no hostname, or taken by another app
                log.warning("no certificate for %s: %s", hostname, exc.message)
                continue
            log.info("issued %s its certificate for %s", app, hostname)
            issued += 1
        return issued

    async def run(self) -> None:
        while True:
            try:
                self.ensure()
            except Exception:
                log.exception("issuing apps' certificates failed; trying again")
            await asyncio.sleep(INTERVAL)
