"""The edge's certificates on the wire: the API's bodies and answers, and the registry's rows.

``POST /v1/apps/{app}/certificates`` takes a ``CertificateRequest``: a
hostname alone (the cluster CA issues one) or with a PEM chain and key (an
import). Answers are ``CertificateView``: never the key. The registry's
``certificates`` rows (``CertificateRow``, keyed ``<app>/<hostname>``) carry
the chain in clear and the key sealed with the cluster's certificates key,
which brokers and proxies hold and workers never do.
"""

from __future__ import annotations

import datetime

from pydantic import BaseModel, ConfigDict

TABLE = "certificates"
SOURCES = ("cluster-ca", "imported")


class CertificateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hostname: str
    certificate: str | None = None  # PEM chain, leaf first: an import
    private_key: str | None = None


class CertificateView(BaseModel):
    """What the API shows of a certificate (the key never leaves the registry sealed)."""

    model_config = ConfigDict(extra="forbid")
    app: str
    hostname: str
    source: str  # cluster-ca or imported
    hostnames: list[str]  # what the leaf covers
    issuer: str
    not_after: datetime.datetime
    fingerprint: str
    created_at: str
    updated_at: str


class CertificateList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    certificates: list[CertificateView]


class CertificateRow(CertificateView):
    """A row of the registry's ``certificates`` table."""

    key: str  # <app>/<hostname>
    chain: str  # PEM
    sealed_key: str  # runtime/secretbox.py, associated data <app>/<hostname>

    def view(self) -> CertificateView:
        return CertificateView.model_validate(self.model_dump(
            exclude={"key", "chain", "sealed_key"}))
