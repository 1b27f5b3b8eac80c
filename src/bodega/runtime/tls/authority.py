"""The cluster CA at work: made once, then signing CSRs under a grant.

``CertificateAuthority.ensure`` makes the CA the first time ``bodega up``
runs on a data dir (and reads it every time after). ``sign`` is the one
signing function, whatever asked: ``bodega up`` for each of its components
(``issue``, which makes the component's key in the component's own TLS
directory and signs its CSR there), the broker's internal listener for a
renewal (``POST /v1/cluster/certificates``, granted the caller's own
identity), and a join (granted by a join token). The private key of whoever
asks never reaches the CA: only its CSR does.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cryptography import x509
from pydantic import BaseModel, ConfigDict

from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import (
    Identity,
    Key,
    Refused,
    cert_pem,
    fingerprint,
    hosts_of,
    identity_of,
    load_csr,
    new_key,
    trust_domain,
)
from bodega.runtime.tls.files import CaDir, TlsDir

log = logging.getLogger("bodega.tls")

Clock = Callable[[], datetime.datetime]


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class CertificateRequest(BaseModel):
    """``POST /v1/cluster/certificates``: a PEM CSR (its key stays with the sender)."""

    model_config = ConfigDict(extra="forbid")
    csr: str


class Issued(BaseModel):
    """What a signer answers: the certificate, the CA it chains to, and when it expires."""

    model_config = ConfigDict(extra="forbid")
    certificate: str
    ca: str
    not_after: datetime.datetime


@dataclass
class CertificateAuthority:
    cert: x509.Certificate
    key: Key
    lifetime: float = pki.LEAF_LIFETIME  # of the leaves it signs, seconds
    clock: Clock = utc_now

    @classmethod
    def ensure(cls, where: CaDir, cluster: str, *, lifetime: float = pki.LEAF_LIFETIME,
               clock: Clock = utc_now) -> CertificateAuthority:
        """The CA kept in ``where``, made now if there is none yet."""
        if where.exists():
            cert, key = where.read()
        else:
            key = new_key()
            cert = pki.make_ca(cluster, key, clock())
            where.write(cert, key)
            log.info("made the cluster CA for %s in %s (%s)", cluster, where.path,
                     fingerprint(cert))
        return cls(cert, key, lifetime, clock)

    @classmethod
    def load(cls, where: CaDir, *, lifetime: float = pki.LEAF_LIFETIME,
             clock: Clock = utc_now) -> CertificateAuthority:
        cert, key = where.read()
        return cls(cert, key, lifetime, clock)

    @property
    def cluster(self) -> str:
        return trust_domain(self.cert)

    def sign(self, csr: bytes, grant: pki.Grant) -> Issued:
        """A certificate for the CSR ``csr`` (PEM), if ``grant`` allows what it asks for."""
        leaf = pki.sign(load_csr(csr), grant, self.cert, self.key, self.clock(), self.lifetime)
        log.info("signed a certificate for %s until %s", identity_of(leaf),
                 leaf.not_valid_after_utc.isoformat(timespec="seconds"))
        return Issued(certificate=cert_pem(leaf).decode(), ca=cert_pem(self.cert).decode(),
                      not_after=leaf.not_valid_after_utc)

    def renew(self, csr: bytes, holder: x509.Certificate) -> Issued:
        """A renewal for ``holder``, a certificate the caller proved it holds (mTLS)."""
        pki.verify(holder, self.cert, self.clock())
        return self.sign(csr, pki.Grant.renewal(holder))

    def issue(self, where: TlsDir, identity: Identity, hosts: Iterable[str]) -> bool:
        """Give the component whose TLS directory is ``where`` a certificate for
        ``identity`` on ``hosts``, unless it holds a good one already (this CA's, the same
        identity and addresses, not yet due for renewal). True if one was issued."""
        wanted = tuple(sorted(set(hosts)))
        if self._current(where, identity, wanted):
            return False
        key = new_key()  # made in the component's own directory, and it stays there
        csr = pki.build_csr(key, identity, wanted)
        leaf = x509.load_pem_x509_certificate(
            self.sign(pki.csr_pem(csr), pki.Grant.exactly(identity, wanted)).certificate.encode())
        where.write_ca(self.cert)
        where.write_identity(key, leaf)
        return True

    def _current(self, where: TlsDir, identity: Identity, hosts: tuple[str, ...]) -> bool:
        if not where.complete():
            return False
        try:
            if where.read_ca() != self.cert:
                return False
            _, cert = where.read_identity()
            now = self.clock()
            return (pki.verify(cert, self.cert, now) == identity
                    and set(hosts) <= set(hosts_of(cert)) and not pki.renewal_due(cert, now))
        except (Refused, ValueError):
            return False
