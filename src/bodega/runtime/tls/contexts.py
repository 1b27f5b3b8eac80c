"""One component's TLS on its internal links: a server context, a client context, reloadable.

Both contexts trust only the cluster CA (``ca.pem`` of the component's TLS
directory) and present the component's own certificate. The server context
requires a client certificate, so a caller without one from the CA is
refused in the handshake; the client context checks the server's chain and
that its certificate names the address dialled. TLS 1.3 only: every peer is
bodega.

``open_server`` serves the same certificate to clients that have none: the
join listener's, for hosts not yet in the cluster (they check the server
against the CA their join token pins).

``reload`` reads ``identity.pem`` again into the same contexts: every
handshake from then on uses the new certificate, while connections already
open keep theirs. That is how a renewal takes effect without a restart.

``refused`` counts what was turned away, by reason
(``bodega_internal_refused_total``): handshakes without a certificate, with
one from another CA, an expired one, plain HTTP; and requests whose role may
not call the route (403).
"""

from __future__ import annotations

import datetime
import functools
import logging
import ssl
from dataclasses import dataclass

from cryptography import x509
from prometheus_client import CollectorRegistry, Counter

from bodega.runtime.tls.authority import utc_now
from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import Identity, Refused, cert_pem, identity_of
from bodega.runtime.tls.files import TlsDir

log = logging.getLogger("bodega.tls")


@dataclass(frozen=True)
class Peer:
    """Who is at the other end of a connection, as its verified certificate says."""

    certificate: x509.Certificate
    identity: Identity | None  # None: a certificate of the CA's that names no identity


class TlsUnusable(ValueError):
    """TLS material a component cannot serve with; the message says why and what to do."""


def server_context(ca_pem: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=ca_pem)
    return context


def open_server_context() -> ssl.SSLContext:
    """A server context asking for no client certificate (the join listener's)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.verify_mode = ssl.CERT_NONE
    return context


def client_context(ca_pem: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # checks the chain and the host name
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_verify_locations(cadata=ca_pem)
    return context


class InternalTls:
    def __init__(self, directory: TlsDir, registry: CollectorRegistry | None = None) -> None:
        self.dir = directory
        self.ca = directory.read_ca()
        ca_pem = cert_pem(self.ca).decode()
        self.server = server_context(ca_pem)
        self.client = client_context(ca_pem)
        self.open_server = open_server_context()
        self.refusals = Counter("bodega_internal_refused_total",
                                "Calls to internal listeners refused, by reason: in the TLS "
                                "handshake, or 403 for a role the route does not allow",
                                ["reason"], registry=registry)
        self.certificate: x509.Certificate | None = None
        self.reload()

    @property
    def identity(self) -> Identity:
        assert self.certificate is not None
        return identity_of(self.certificate)

    @property
    def not_after(self) -> datetime.datetime:
        assert self.certificate is not None
        return self.certificate.not_valid_after_utc

    def reload(self) -> None:
        """Read the identity file again; new handshakes use it from now on."""
        try:
            _, cert = self.dir.read_identity()
            pki.verify(cert, self.ca, utc_now())
        except Refused as exc:
            raise TlsUnusable(f"{self.dir.identity_path}: {exc}") from None
        for context in (self.server, self.client, self.open_server):
            context.load_cert_chain(self.dir.identity_path)
        self.certificate = cert
        log.info("presenting %s's certificate, valid until %s", self.identity,
                 self.not_after.isoformat(timespec="seconds"))

    def refused(self, reason: str) -> None:
        self.refusals.labels(reason).inc()

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def peer(der: bytes) -> Peer:
        """The peer a verified certificate (DER) shows, parsed once per certificate."""
        certificate = x509.load_der_x509_certificate(der)
        try:
            return Peer(certificate, identity_of(certificate))
        except (Refused, ValueError):
            return Peer(certificate, None)


def refusal_reason(exc: BaseException) -> str:
    """A short label for why a handshake failed, from the error the ssl module raised."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        message = (exc.verify_message or "").lower()
        if "expired" in message:
            return "expired"
        if "not yet valid" in message:
            return "not yet valid"
        if "issuer" in message or "self-signed" in message or "self signed" in message:
            return "unknown authority"
        return "bad certificate"
    if isinstance(exc, ssl.SSLError):
        reason = (exc.reason or "").upper()
        if reason in ("PEER_DID_NOT_RETURN_A_CERTIFICATE", "NO_CERTIFICATE_RETURNED"):
            return "no certificate"
        if reason in ("HTTP_REQUEST", "WRONG_VERSION_NUMBER", "HTTPS_PROXY_REQUEST",
                      "UNEXPECTED_RECORD", "PACKET_LENGTH_TOO_LONG", "RECORD_LAYER_FAILURE"):
            return "not tls"
        return "handshake"
    if isinstance(exc, TimeoutError):
        return "handshake timeout"
    return "handshake"
