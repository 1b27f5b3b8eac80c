"""The cluster's PKI as pure functions: a CA, CSRs, signing under a grant, checking a peer.

Every component of a cluster proves who it is with a certificate from the
cluster's CA (EC P-256; ``identity.py`` says how a certificate names its
holder). The CA lives ten years, a leaf one by default.

A leaf is only ever made from a CSR: the component's private key never
leaves where it was made. The CA signs what a ``Grant`` allows and nothing
else: the identity and addresses in the result come from the grant's check of
the request, never copied blindly from it. ``bodega up`` grants each of its
components exactly its own identity; a renewal grants the identity (and at
most the addresses) of the certificate the caller already holds.

Nothing here reads a file, a clock or a socket: callers pass ``now``.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bodega.runtime.tls.core.identity import (
    Identity,
    Key,
    Refused,
    checked,
    host_name,
    hosts_in,
    hosts_of,
    identity_of,
    trust_domain,
)

CA_LIFETIME = 10 * 365 * 86400.0
LEAF_LIFETIME = 365 * 86400.0
MIN_LIFETIME = 10.0  # seconds; tests use minutes, nothing useful lives shorter
RENEW_AT = 2 / 3  # of a leaf's life
MAX_BACKDATE = 300.0  # notBefore is this far back (at most a tenth of the life): clock skew


@dataclass(frozen=True)
class Grant:
    """What a signer may issue for one request: an identity (``None``: any of ``roles``
    with the name asked for) and the addresses allowed (``None``: any asked for)."""

    roles: frozenset[str]
    name: str | None = None
    hosts: frozenset[str] | None = None

    @classmethod
    def exactly(cls, identity: Identity, hosts: Iterable[str] | None = None) -> Grant:
        """One identity, as ``bodega up`` grants each of its components."""
        return cls(frozenset({identity.role}), identity.name,
                   None if hosts is None else frozenset(hosts))

    @classmethod
    def renewal(cls, holder: x509.Certificate) -> Grant:
        """A renewal: the identity of the certificate the caller holds, and at most its
        addresses (a new address is a new issue, not a renewal)."""
        return cls.exactly(identity_of(holder), hosts_of(holder))


@dataclass(frozen=True)
class Requested:
    identity: Identity
    hosts: tuple[str, ...]


# -- the CA ---------------------------------------------------------------------------------------
def make_ca(cluster: str, key: Key, now: datetime.datetime,
            lifetime: float = CA_LIFETIME) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"bodega cluster {cluster}")])
    return (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(seconds=MAX_BACKDATE))
            .not_valid_after(now + datetime.timedelta(seconds=lifetime))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(
                [x509.UniformResourceIdentifier(f"spiffe://{cluster}")]), critical=False)
            .sign(key, hashes.SHA256()))


# -- requests and signing ---------------------------------------------------------------------
def build_csr(key: Key, identity: Identity, hosts: Iterable[str]
              ) -> x509.CertificateSigningRequest:
    """A request for ``identity``, serving on ``hosts`` (DNS names or IP addresses)."""
    return (x509.CertificateSigningRequestBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, str(identity))]))
            .add_extension(x509.SubjectAlternativeName(
                [x509.UniformResourceIdentifier(checked(identity).uri),
                 *(host_name(h) for h in sorted(set(hosts)))]), critical=False)
            .sign(key, hashes.SHA256()))


def csr_pem(csr: x509.CertificateSigningRequest) -> bytes:
    return csr.public_bytes(serialization.Encoding.PEM)


def requested(csr: x509.CertificateSigningRequest) -> Requested:
    """What a CSR asks for, once its signature shows its sender holds the key."""
    if not csr.is_signature_valid:
        raise Refused("malformed", "the request's signature does not match its key")
    if not isinstance(csr.public_key(), ec.EllipticCurvePublicKey):
        raise Refused("malformed", "the request's key is not an EC key")
    try:
        names = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        raise Refused("identity", "the request names no identity") from None
    uris = names.get_values_for_type(x509.UniformResourceIdentifier)
    if len(uris) != 1:
        raise Refused("identity", "the request must name exactly one spiffe:// identity")
    return Requested(Identity.from_uri(uris[0]), hosts_in(names))


def authorize(asked: Requested, grant: Grant, cluster: str) -> Requested:
    """``asked`` if ``grant`` allows all of it in ``cluster``; ``Refused`` naming what not."""
    who = asked.identity
    if who.cluster != cluster:
        raise Refused("identity", f"the request is for cluster {who.cluster}, not {cluster}")
    if who.role not in grant.roles:
        raise Refused("role", f"a {who.role} certificate is not granted here "
                              f"(granted: {', '.join(sorted(grant.roles)) or 'none'})")
    if grant.name is not None and who.name != grant.name:
        raise Refused("identity", f"the request is for {who.name}, granted {grant.name} only")
    extra = set(asked.hosts) - grant.hosts if grant.hosts is not None else set()
    if extra:
        raise Refused("hosts", f"addresses not granted: {', '.join(sorted(extra))}")
    return asked


def sign(csr: x509.CertificateSigningRequest, grant: Grant, ca: x509.Certificate, ca_key: Key,
         now: datetime.datetime, lifetime: float = LEAF_LIFETIME) -> x509.Certificate:
    """A leaf for what ``csr`` asks, if ``grant`` allows it, valid ``lifetime`` seconds."""
    if lifetime < MIN_LIFETIME:
        raise ValueError(f"a certificate lives at least {MIN_LIFETIME:g}s")
    allowed = authorize(requested(csr), grant, trust_domain(ca))
    not_after = min(now + datetime.timedelta(seconds=lifetime), ca.not_valid_after_utc)
    backdate = min(MAX_BACKDATE, lifetime / 10)
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                        str(allowed.identity))]))
            .issuer_name(ca.subject).public_key(csr.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(seconds=backdate))
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=False, crl_sign=False,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .add_extension(x509.SubjectAlternativeName(
                [x509.UniformResourceIdentifier(allowed.identity.uri),
                 *(host_name(h) for h in allowed.hosts)]), critical=False)
            .sign(ca_key, hashes.SHA256()))


# -- reading and checking a certificate --------------------------------------------------------
def verify(cert: x509.Certificate, ca: x509.Certificate, now: datetime.datetime,
           roles: Iterable[str] | None = None) -> Identity:
    """The identity ``cert`` proves, if ``ca`` issued it, it is valid at ``now`` and (when
    ``roles`` is given) its role is one of them; ``Refused`` with the reason otherwise.

    The same checks a TLS handshake makes (issuer, signature, validity), plus the
    cluster's own: one identity, in the CA's trust domain, of a role allowed here.
    """
    if cert.issuer != ca.subject:
        raise Refused("unknown authority", "the certificate is not from this cluster's CA")
    try:
        public = ca.public_key()
        assert isinstance(public, ec.EllipticCurvePublicKey)
        hash_algorithm = cert.signature_hash_algorithm
        assert hash_algorithm is not None
        public.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(hash_algorithm))
    except (InvalidSignature, AssertionError):
        raise Refused("unknown authority", "the certificate's signature is not this CA's"
                      ) from None
    if now < cert.not_valid_before_utc:
        raise Refused("not yet valid", f"the certificate is valid from "
                                       f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S}Z")
    if now > cert.not_valid_after_utc:
        raise Refused("expired", f"the certificate expired at "
                                 f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S}Z")
    who = identity_of(cert)
    if who.cluster != trust_domain(ca):
        raise Refused("identity", f"the certificate is for cluster {who.cluster}")
    allowed = None if roles is None else frozenset(roles)
    if allowed is not None and who.role not in allowed:
        raise Refused("role", f"a {who.role} may not do this")
    return who


# -- renewal ------------------------------------------------------------------------------------
def renew_at(cert: x509.Certificate, fraction: float = RENEW_AT) -> datetime.datetime:
    """When the holder asks for a new certificate: ``fraction`` of the way through its life."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * fraction


def renewal_due(cert: x509.Certificate, now: datetime.datetime,
                fraction: float = RENEW_AT) -> bool:
    return now >= renew_at(cert, fraction)


def renewal_wait(cert: x509.Certificate, now: datetime.datetime, failures: int = 0,
                 fraction: float = RENEW_AT) -> float:
    """Seconds to wait before asking for a new certificate: until ``renew_at`` at first;
    after ``failures`` failed tries, doubling from a second but never more than a minute
    or a tenth of the time left, so several tries fit before the certificate expires."""
    if failures <= 0:
        return max(0.0, (renew_at(cert, fraction) - now).total_seconds())
    return retry_wait(failures, max(0.0, (cert.not_valid_after_utc - now).total_seconds()))


def retry_wait(failures: int, left: float = math.inf) -> float:
    """Seconds to wait after ``failures`` failed tries: doubling from a second, never more
    than a minute, or a tenth of the ``left`` seconds a certificate has (none known: no
    bound but the minute)."""
    return max(0.5, min(2.0 ** (failures - 1), 60.0, left / 10))


