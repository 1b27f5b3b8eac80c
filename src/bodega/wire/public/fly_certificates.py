"""The Machines API's certificate objects (``App_Certificates_*``), field for field.

Bodies: ``CustomCertificateRequest`` (``POST .../certificates/custom``: a PEM
``fullchain``, leaf first, and its ``private_key``), ``AcmeCertificateRequest``
(``POST .../certificates/acme``) and bodega's own ``IssueCertificateRequest``
(``POST .../certificates``: the cluster CA issues one). Answers:
``CertificateDetail`` (show, the creates, the ``acme`` delete),
``CertificateCheck`` (``check``), ``CustomCertificateRemoved`` (the ``custom``
delete) and ``CertificateListing`` (list, paged by ``cursor``).

bodega's certificates map onto the document's two sources: ``fly`` is one the
cluster CA issued, ``custom`` one an operator brought. Entries add two fields
the document lacks: ``hostnames`` (what the leaf covers) and ``fingerprint``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Source = Literal["custom", "fly"]
SOURCE_LABELS: dict[str, str] = {"fly": "cluster-ca", "custom": "imported"}
ACTIVE, EXPIRED, INVALID, REMOVED = "active", "expired", "invalid", "removed"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CustomCertificateRequest(_Body):
    hostname: str
    fullchain: str  # PEM, the leaf first
    private_key: str  # PEM, unencrypted


class AcmeCertificateRequest(_Body):
    hostname: str


class IssueCertificateRequest(_Body):
    """bodega's ``POST /v1/apps/{app}/certificates``: the cluster CA issues one."""

    hostname: str


class IssuedCertificate(_Body):
    certificate_authority: str
    expires_at: str
    type: Literal["rsa", "ecdsa"]


class CertificateEntry(_Body):
    created_at: str
    expires_at: str
    issued: list[IssuedCertificate]
    issuer: str
    source: Source
    status: Literal["active", "pending_ownership", "pending_validation"] = "active"
    hostnames: list[str]  # bodega: the names the leaf covers
    fingerprint: str  # bodega: SHA-256 of the leaf


class CertificateValidation(_Body):
    alpn_configured: bool = False
    dns_configured: bool = False
    http_configured: bool = False
    ownership_txt_configured: bool = False


class CertificateValidationError(_Body):
    code: str
    message: str
    remediation: str
    timestamp: str


class CertificateDetail(_Body):
    hostname: str
    status: str  # active, expired, invalid (check), removed (a delete's answer)
    configured: bool
    acme_requested: bool = False
    certificates: list[CertificateEntry]
    validation: CertificateValidation = CertificateValidation()
    validation_errors: list[CertificateValidationError] = []


class CertificateCheck(CertificateDetail):
    """``check``'s answer: the stored chain and key checked again, now."""


class CustomCertificateRemoved(CertificateDetail):
    warning: str | None = None


class CertificateSummary(_Body):
    hostname: str
    status: str
    configured: bool
    created_at: str
    updated_at: str
    has_custom_certificate: bool
    has_fly_certificate: bool
    acme_requested: bool = False
    acme_alpn_configured: bool = False
    acme_dns_configured: bool = False
    acme_http_configured: bool = False
    ownership_txt_configured: bool = False


class CertificateListing(_Body):
    certificates: list[CertificateSummary]
    total_count: int
    next_cursor: str | None = None  # the last hostname of this page; absent on the last
