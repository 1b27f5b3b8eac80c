"""Asking a signer in another process (or on another host) for a certificate.

``POST /v1/cluster/certificates``, on a broker's internal listener.

The signer is a broker holding the cluster CA's key (its member metadata says
``signer``); it listens on its internal listener, mutual TLS, so the caller
proves who it is with the certificate it holds now, and the signer issues a
certificate for that identity only (``bodega.runtime.tls.authority``). The
body is a CSR: the caller's new private key never leaves it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydantic import ValidationError

from bodega.model.errors import BodegaError, Indeterminate, Unavailable
from bodega.runtime.tls.authority import CertificateRequest, Issued
from bodega.runtime.tls.contexts import InternalTls
from bodega.wire.transport.json_client import JsonClient
from bodega.wire.transport.seam import Transport

CERTIFICATES_PATH = "/v1/cluster/certificates"
log = logging.getLogger("bodega.tls")


async def request_certificate(url: str, tls: InternalTls, csr: bytes,
                              timeout: float = 10.0, transport: Transport | None = None
                              ) -> Issued:
    """Ask the signer at ``url`` (its internal listener) to sign ``csr`` (PEM).
    ``transport``: how the call travels (aiohttp with ``tls``'s client context unless given)."""
    async with JsonClient(url, None, ssl=tls.client, timeout=timeout,
                          what="certificate signer", transport=transport) as signer:
        answer = await signer.request("POST", CERTIFICATES_PATH,
                                      json=CertificateRequest(csr=csr.decode()).model_dump())
    try:
        return Issued.model_validate(answer)
    except ValidationError as exc:
        raise Indeterminate(f"the signer at {url} answered what is not a certificate: "
                            f"{exc.errors()[0].get('msg', 'invalid')}") from None


class RemoteSigner:
    """Signs through whichever signer ``find`` names first that answers: one that cannot be
    reached, does not answer in ``timeout`` or answers an error is passed over for the next,
    so a renewal goes through any live server."""

    def __init__(self, tls: InternalTls, find: Callable[[], list[str]],
                 timeout: float = 10.0, transport: Transport | None = None) -> None:
        self.tls = tls
        self.find = find
        self.timeout = timeout
        self.transport = transport

    async def sign(self, csr: bytes) -> Issued:
        urls = self.find()
        if not urls:
            raise Unavailable("no certificate signer in the cluster view (a broker with the "
                              "cluster CA's key)")
        failures = []
        for url in urls:
            try:
                return await request_certificate(url, self.tls, csr, self.timeout,
                                                 self.transport)
            except BodegaError as err:
                log.info("signer at %s: %s", url, err.message)
                failures.append(f"{url}: {err.message}")
        raise Unavailable("no signer signed: " + "; ".join(failures))
