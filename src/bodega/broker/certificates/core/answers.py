"""What the Machines API shows of the edge's certificates: pure functions of a row and ``now``.

A row (``wire/internal/certificates.py``) becomes the document's ``CertificateDetail``,
``CertificateSummary`` or ``CertificateCheck`` (``wire/public/fly_certificates.py``);
a list is cut into pages here too. Nothing here reads the clock or the view.
"""

from __future__ import annotations

import datetime

from bodega.runtime.tls.core import sites
from bodega.wire.internal.certificates import CertificateRow
from bodega.wire.public.fly_certificates import (
    ACTIVE,
    EXPIRED,
    INVALID,
    REMOVED,
    CertificateCheck,
    CertificateDetail,
    CertificateEntry,
    CertificateListing,
    CertificateSummary,
    CertificateValidationError,
    CustomCertificateRemoved,
    IssuedCertificate,
    Source,
)

DEFAULT_LIMIT, MAX_LIMIT = 25, 500
REMEDY = {"expired": "renew it: `bodega certs add` (cluster CA) or upload a new one to "
                     "POST /v1/apps/{app}/certificates/custom",
          "hostname": "upload one that covers the hostname to "
                      "POST /v1/apps/{app}/certificates/custom",
          "malformed": "upload the chain and its key again to "
                       "POST /v1/apps/{app}/certificates/custom"}


def source_of(row: CertificateRow) -> Source:
    return "fly" if row.source == "cluster-ca" else "custom"


def _stamp(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def status_of(row: CertificateRow, now: datetime.datetime) -> str:
    return EXPIRED if now > row.not_after else ACTIVE


def entry(row: CertificateRow) -> CertificateEntry:
    expires = _stamp(row.not_after)
    return CertificateEntry(
        created_at=row.updated_at, expires_at=expires, issuer=row.issuer,
        source=source_of(row), hostnames=row.hostnames, fingerprint=row.fingerprint,
        issued=[IssuedCertificate(certificate_authority=row.issuer, expires_at=expires,
                                  type="rsa" if sites.key_type(row.chain.encode()) == "rsa"
                                  else "ecdsa")])


def detail(row: CertificateRow, now: datetime.datetime) -> CertificateDetail:
    status = status_of(row, now)
    return CertificateDetail(hostname=row.hostname, status=status, configured=status == ACTIVE,
                             certificates=[entry(row)])


def removed(hostname: str, warning: str | None = None) -> CustomCertificateRemoved:
    """A hostname's detail once its one certificate is gone."""
    return CustomCertificateRemoved(hostname=hostname, status=REMOVED, configured=False,
                                    certificates=[], warning=warning)


def checked(row: CertificateRow, now: datetime.datetime,
            problem: tuple[str, str] | None) -> CertificateCheck:
    """``problem``: (reason, message) if the stored chain and key no longer pass; None if
    they do."""
    errors = [] if problem is None else [CertificateValidationError(
        code=problem[0], message=problem[1], timestamp=_stamp(now),
        remediation=REMEDY.get(problem[0], REMEDY["malformed"]).replace("{app}", row.app))]
    status = ACTIVE if problem is None else EXPIRED if problem[0] == "expired" else INVALID
    return CertificateCheck(hostname=row.hostname, status=status, configured=problem is None,
                            certificates=[entry(row)], validation_errors=errors)


def summary(row: CertificateRow, now: datetime.datetime) -> CertificateSummary:
    status = status_of(row, now)
    fly = source_of(row) == "fly"
    return CertificateSummary(
        hostname=row.hostname, status=status, configured=status == ACTIVE,
        created_at=row.created_at, updated_at=row.updated_at,
        has_custom_certificate=not fly, has_fly_certificate=fly)


def page(rows: list[CertificateRow], now: datetime.datetime, *, filter: str = "",
         cursor: str = "", limit: int = DEFAULT_LIMIT) -> CertificateListing:
    """Rows whose hostname contains ``filter``, by hostname, after ``cursor`` (the last
    hostname of the page before), ``limit`` of them; ``next_cursor`` if more follow."""
    matching = sorted((r for r in rows if filter.lower() in r.hostname),
                      key=lambda r: r.hostname)
    after = [r for r in matching if r.hostname > cursor] if cursor else matching
    shown = after[:limit]
    more = len(after) > limit
    return CertificateListing(certificates=[summary(r, now) for r in shown],
                              total_count=len(matching),
                              next_cursor=shown[-1].hostname if more else None)


def parse_limit(text: str | None) -> int:
    """``limit`` from a query: 1 to 500, 25 if absent; ``ValueError`` saying why not."""
    if text is None or text == "":
        return DEFAULT_LIMIT
    try:
        limit = int(text)
    except ValueError:
        raise ValueError(f"limit must be a whole number, not {text!r}") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be 1 to {MAX_LIMIT}, not {limit}")
    return limit
