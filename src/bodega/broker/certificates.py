"""The edge's certificates: shared rows of the view that any broker writes and every proxy serves.

A certificate is a row of the registry's ``certificates`` table keyed
``<app>/<hostname>``: the chain in clear, the key sealed with the cluster's
certificates key (``runtime/secretbox.py``, associated data the row's key, so
a sealed key moved to another row does not open). The cluster CA issues one
(``add``: a broker started with the CA signs it) or the operator brings one
(``add`` with a chain and key: checked to be a pair that covers the hostname
and has not expired). Adding again renews: the row is replaced and every
proxy swaps the certificate in place. A hostname belongs to one app.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bodega.broker.apps import Apps
from bodega.broker.catalog import Catalog
from bodega.model.errors import BadRequest, Conflict, NotFound
from bodega.model.machine import rfc3339
from bodega.runtime.secretbox import SecretBox
from bodega.runtime.tls import sites
from bodega.runtime.tls.authority import CertificateAuthority, utc_now
from bodega.runtime.tls.identity import Refused
from bodega.wire.certificates import (
    TABLE,
    CertificateList,
    CertificateRequest,
    CertificateRow,
    CertificateView,
)

MAX_PER_APP = 100


class AppCertificates:
    def __init__(self, catalog: Catalog, apps: Apps, box: SecretBox,
                 authority: CertificateAuthority | None,
                 clock: Callable[[], float] = time.time) -> None:
        self.catalog = catalog
        self.apps = apps
        self.box = box
        self.authority = authority
        self.clock = clock

    def _rows(self, app: str) -> list[CertificateRow]:
        rows = [CertificateRow.model_validate(d) for d in self.catalog.rows(TABLE, app=app)]
        return sorted(rows, key=lambda r: r.hostname)

    def list(self, app: str) -> CertificateList:
        self.apps.require(app)
        return CertificateList(certificates=[r.view() for r in self._rows(app)])

    def get(self, app: str, hostname: str) -> CertificateView:
        self.apps.require(app)
        return self._row(app, hostname).view()

    def _row(self, app: str, hostname: str) -> CertificateRow:
        doc = self.catalog.get(TABLE, f"{app}/{_hostname(hostname)}")
        if doc is None:
            raise NotFound(f"no certificate for {hostname} in app {app}")
        return CertificateRow.model_validate(doc)

    def add(self, app: str, body: CertificateRequest, also: tuple[str, ...] = ()
            ) -> CertificateView:
        """Issue (hostname alone) or import (with a chain and key) ``body.hostname``'s;
        an issued one covers the names in ``also`` too."""
        self.apps.require(app)
        hostname = _hostname(body.hostname)
        self._check_owner(app, hostname)
        if (body.certificate is None) != (body.private_key is None):
            raise BadRequest("an import needs both certificate and private_key (PEM)")
        try:
            if body.certificate is not None and body.private_key is not None:
                made = sites.check_pair(body.certificate.encode(), body.private_key.encode(),
                                        hostname, utc_now())
                source = "imported"
            elif self.authority is None:
                raise BadRequest("this cluster's broker has no CA to issue certificates with "
                                 "(it runs without --ca-dir): import one instead")
            else:
                made = sites.issue(self.authority.cert, self.authority.key,
                                   (hostname, *also), utc_now())
                source = "cluster-ca"
        except Refused as exc:
            raise BadRequest(f"certificate for {hostname}: {exc}") from None
        key = f"{app}/{hostname}"
        old = self.catalog.get(TABLE, key)
        if old is None and len(self._rows(app)) >= MAX_PER_APP:
            raise BadRequest(f"at most {MAX_PER_APP} certificates per app")
        now = rfc3339(self.clock())
        row = CertificateRow(
            key=key, app=app, hostname=hostname, source=source,
            hostnames=list(made.info.hostnames), issuer=made.info.issuer,
            not_after=made.info.not_after, fingerprint=made.info.fingerprint,
            created_at=str(old["created_at"]) if old else now, updated_at=now,
            chain=made.chain_pem.decode(),
            sealed_key=self.box.seal(app, hostname, made.key_pem.decode()))
        self.catalog.put_shared(TABLE, key, row.model_dump(mode="json"))
        return row.view()

    def _check_owner(self, app: str, hostname: str) -> None:
        for doc in self.catalog.rows(TABLE):
            if doc.get("hostname") == hostname and doc.get("app") != app:
                raise Conflict(f"{hostname} already has a certificate in app {doc.get('app')}; "
                               "remove it there first")

    def remove(self, app: str, hostname: str) -> CertificateView:
        self.apps.require(app)
        row = self._row(app, hostname)
        self.catalog.delete_shared(TABLE, row.key)
        return row.view()


def _hostname(hostname: str) -> str:
    try:
        return sites.check_hostname(hostname)
    except Refused as exc:
        raise BadRequest(str(exc)) from None


def remove_all(catalog: Catalog, app: str) -> None:
    """Forget every certificate of ``app`` (it is being deleted)."""
    for doc in catalog.rows(TABLE, app=app):
        catalog.delete_shared(TABLE, str(doc["key"]))
