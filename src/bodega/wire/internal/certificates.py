"""The edge's certificates on the wire: the broker's request, and the registry's rows.

``CertificateRequest`` is what the broker's certificates take: a hostname
alone (the cluster CA issues one) or with a PEM chain and key (an import);
the API's bodies and answers are the Machines API's (``fly_certificates.py``)
and never carry the key. The registry's ``certificates`` rows
(``CertificateRow``, keyed ``<app>/<hostname>``) carry the chain in clear
and the key sealed with the cluster's certificates key, which brokers and
proxies hold and workers never do.
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


class CertificateRow(BaseModel):
    """A row of the registry's ``certificates`` table."""

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
    key: str  # <app>/<hostname>
    chain: str  # PEM
    sealed_key: str  # runtime/secretbox.py, associated data <app>/<hostname>
