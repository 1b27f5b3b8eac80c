"""A new certificate before the old one expires, taken without a restart.

At two thirds of its certificate's life (``pki.renewal_wait``) a component
makes a new key and a CSR for the same identity and addresses, and asks its
signer: the CA itself where the CA's key is (a server's broker), or a
broker that holds it, over mutual TLS with the certificate it still has
(``POST /v1/cluster/certificates``). The answer is checked (this CA's, the
same identity, for our new key), written in one atomic replace of
``identity.pem``, and loaded into the live server and client contexts: new
handshakes present it, open connections carry on. A failed try is retried
sooner and sooner, never past the old certificate's end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from bodega.runtime.tls.authority import CertificateAuthority, Clock, Issued, utc_now
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import Refused, hosts_of, load_cert, new_key

log = logging.getLogger("bodega.tls")


class Signer(Protocol):
    async def sign(self, csr: bytes) -> Issued:
        """A certificate for the PEM CSR ``csr``; raises if none can be had now."""
        ...


class LocalSigner:
    """Signs with the CA in this process (the broker on the CA's host)."""

    def __init__(self, authority: CertificateAuthority, tls: InternalTls) -> None:
        self.authority = authority
        self.tls = tls

    async def sign(self, csr: bytes) -> Issued:
        assert self.tls.certificate is not None
        return self.authority.renew(csr, self.tls.certificate)


class Renewal:
    def __init__(self, tls: InternalTls, signer: Signer, *,
                 on_renewed: Callable[[InternalTls], None] = lambda _tls: None,
                 clock: Clock = utc_now, fraction: float = pki.RENEW_AT) -> None:
        self.tls = tls
        self.signer = signer
        self.on_renewed = on_renewed
        self.clock = clock
        self.fraction = fraction
        self.renewed = 0

    async def run(self) -> None:
        failures = 0
        while True:
            assert self.tls.certificate is not None
            await asyncio.sleep(pki.renewal_wait(self.tls.certificate, self.clock(), failures,
                                                 self.fraction))
            try:
                await self.renew()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                log.warning("could not renew %s's certificate (try %d; it expires at %s): %s",
                            self.tls.identity, failures,
                            self.tls.not_after.isoformat(timespec="seconds"), exc)
            else:
                failures = 0

    async def renew(self) -> None:
        """One renewal, now."""
        old = self.tls.certificate
        assert old is not None
        key = new_key()
        csr = pki.build_csr(key, self.tls.identity, hosts_of(old))
        issued = await self.signer.sign(pki.csr_pem(csr))
        cert = load_cert(issued.certificate.encode())
        if cert.public_key() != key.public_key():
            raise Refused("malformed", "the signer answered a certificate for another key")
        if pki.verify(cert, self.tls.ca, self.clock()) != self.tls.identity:
            raise Refused("identity", "the signer answered a certificate for someone else")
        self.tls.dir.write_identity(key, cert)
        self.tls.reload()
        self.renewed += 1
        self.on_renewed(self.tls)
