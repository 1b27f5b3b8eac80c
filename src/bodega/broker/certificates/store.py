"""The edge's certificates: shared rows of the view that any broker writes and every proxy serves.

A certificate is a row of the registry's ``certificates`` table keyed
``<app>/<hostname>``: the chain in clear, the key sealed with the cluster's
certificates key (``runtime/secretbox.py``, associated data the row's key, so
a sealed key moved to another row does not open). The cluster CA issues one
(``add``: a broker started with the CA signs it) or the operator brings one
(``add`` with a chain and key: checked to be a pair that covers the hostname
and has not expired). Adding again renews: the row is replaced and every
proxy swaps the certificate in place. A hostname belongs to one app.

The Machines API's operations map onto these: ``custom`` imports, ``acme`` is
refused (no ACME client here: 422 naming ``custom`` and the cluster CA),
``check`` opens the sealed key and checks the pair again now, and the
``acme``/``custom`` deletes remove a certificate only if it is of that kind
(``fly`` is the cluster CA's). Answers are rendered by ``answers.py``.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

from bodega.broker.certificates.core import answers
from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import Catalog
from bodega.model.errors import BadRequest, Conflict, NotFound, Unprocessable
from bodega.model.machine import rfc3339
from bodega.runtime.secretbox import SecretBox, SecretUnreadable
from bodega.runtime.tls.authority import CertificateAuthority, utc_now
from bodega.runtime.tls.core import sites
from bodega.runtime.tls.core.identity import Refused
from bodega.wire.internal.certificates import TABLE, CertificateRequest, CertificateRow
from bodega.wire.public.fly_certificates import (
    AcmeCertificateRequest,
    CertificateCheck,
    CertificateDetail,
    CertificateListing,
    CustomCertificateRequest,
    Source,
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

    def now(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.clock(), datetime.UTC)

    def list(self, app: str, *, filter: str = "", cursor: str = "",
             limit: int = answers.DEFAULT_LIMIT) -> CertificateListing:
        self.apps.require(app)
        return answers.page(self._rows(app), self.now(), filter=filter, cursor=cursor,
                            limit=limit)

    def get(self, app: str, hostname: str) -> CertificateDetail:
        self.apps.require(app)
        return answers.detail(self._row(app, hostname), self.now())

    def _row(self, app: str, hostname: str) -> CertificateRow:
        doc = self.catalog.get(TABLE, f"{app}/{_hostname(hostname)}")
        if doc is None:
            raise NotFound(f"no certificate for {hostname} in app {app}")
        return CertificateRow.model_validate(doc)

    def add(self, app: str, body: CertificateRequest, also: tuple[str, ...] = ()
            ) -> CertificateRow:
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
            raise Unprocessable(f"certificate for {hostname}: {exc}") from None
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
        return row

    def issue(self, app: str, hostname: str) -> CertificateDetail:
        return answers.detail(self.add(app, CertificateRequest(hostname=hostname)), self.now())

    def custom(self, app: str, body: CustomCertificateRequest) -> CertificateDetail:
        row = self.add(app, CertificateRequest(hostname=body.hostname,
                                               certificate=body.fullchain,
                                               private_key=body.private_key))
        return answers.detail(row, self.now())

    def acme(self, app: str, body: AcmeCertificateRequest) -> CertificateDetail:
        """Refused, once the app and hostname are known good: no ACME client here."""
        self.apps.require(app)
        hostname = _hostname(body.hostname)
        self._check_owner(app, hostname)
        raise Unprocessable(
            f"this cluster has no ACME client: it cannot obtain a certificate for {hostname} "
            "from an ACME CA; upload one with POST /v1/apps/{app}/certificates/custom "
            "(bodega certs import), or have the cluster CA issue one (bodega certs add)"
            .replace("{app}", app), status="unimplemented")

    def check(self, app: str, hostname: str) -> CertificateCheck:
        """The stored chain and key checked again now: a pair, covering, not expired."""
        self.apps.require(app)
        row = self._row(app, hostname)
        problem: tuple[str, str] | None = None
        try:
            key = self.box.open(app, row.hostname, row.sealed_key)
            sites.check_pair(row.chain.encode(), key.encode(), row.hostname, self.now())
        except Refused as exc:
            problem = (exc.reason, str(exc))
        except SecretUnreadable:
            problem = ("sealed_key", "the key does not open with this cluster's certificates "
                                     "key (sealed with another)")
        return answers.checked(row, self.now(), problem)

    def _check_owner(self, app: str, hostname: str) -> None:
        for doc in self.catalog.rows(TABLE):
            if doc.get("hostname") == hostname and doc.get("app") != app:
                raise Conflict(f"{hostname} already has a certificate in app {doc.get('app')}; "
                               "remove it there first")

    def remove(self, app: str, hostname: str, source: Source | None = None) -> CertificateRow:
        """Forget ``hostname``'s certificate; with ``source``, only one of that kind."""
        self.apps.require(app)
        row = self._row(app, hostname)
        if source is not None and answers.source_of(row) != source:
            kind, other = (("ACME (cluster CA)", "custom") if source == "fly"
                           else ("custom", "acme"))
            raise NotFound(f"{row.hostname} in app {app} has no {kind} certificate (its "
                           f"certificate is {answers.source_of(row)}: DELETE "
                           f"/v1/apps/{app}/certificates/{row.hostname}/{other})")
        self.catalog.delete_shared(TABLE, row.key)
        return row


def _hostname(hostname: str) -> str:
    try:
        return sites.check_hostname(hostname)
    except Refused as exc:
        raise BadRequest(str(exc)) from None


def remove_all(catalog: Catalog, app: str) -> None:
    """Forget every certificate of ``app`` (it is being deleted)."""
    for doc in catalog.rows(TABLE, app=app):
        catalog.delete_shared(TABLE, str(doc["key"]))
