"""Who a certificate says its holder is, and the PEM forms keys and certificates travel in.

An identity is one URI in a certificate's subject alternative names,
``spiffe://<cluster>/<role>/<name>`` (SPIFFE's form): the cluster is the CA's
trust domain (its own certificate carries ``spiffe://<cluster>``), the role
says what the holder may call (``access.py``), the name which component it
is. The DNS names and IP addresses beside it are where the holder serves.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

# ``image-registry``: the cluster's image registry serves with one (access.py lets it call
# nothing).
ROLES = frozenset({"worker", "broker", "proxy", "agent", "admin", "image-registry",
                   "metrics-store"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")

Key = ec.EllipticCurvePrivateKey


class Refused(ValueError):
    """A certificate or a request the cluster does not accept; ``reason`` is a short label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Identity:
    cluster: str
    role: str
    name: str

    @property
    def uri(self) -> str:
        return f"spiffe://{self.cluster}/{self.role}/{self.name}"

    @classmethod
    def from_uri(cls, uri: str) -> Identity:
        scheme, _, rest = uri.partition("://")
        parts = rest.split("/")
        if scheme != "spiffe" or len(parts) != 3:
            raise Refused("identity", f"{uri!r} is not spiffe://<cluster>/<role>/<name>")
        return checked(cls(*parts))

    def __str__(self) -> str:
        return f"{self.role} {self.name}"


def checked(identity: Identity) -> Identity:
    if identity.role not in ROLES:
        raise Refused("identity", f"unknown role {identity.role!r}: one of {sorted(ROLES)}")
    for part in (identity.cluster, identity.name):
        if not _NAME.fullmatch(part):
            raise Refused("identity", f"{part!r} is not a name (letters, digits, . _ -)")
    return identity


# -- keys and PEM -------------------------------------------------------------------------------
def new_key() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: Key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def load_key(pem: bytes) -> Key:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise Refused("malformed", "not an EC private key")
    return key


def load_cert(pem: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise Refused("malformed", f"not a PEM certificate: {exc}") from None


def load_csr(pem: bytes) -> x509.CertificateSigningRequest:
    try:
        return x509.load_pem_x509_csr(pem)
    except ValueError as exc:
        raise Refused("malformed", f"not a PEM certificate request: {exc}") from None


def fingerprint(cert: x509.Certificate) -> str:
    """``sha256:<hex>`` of the DER: what a join token pins the CA by."""
    return "sha256:" + hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


# -- reading a certificate ----------------------------------------------------------------------
def trust_domain(ca: x509.Certificate) -> str:
    """The cluster a CA vouches for (its ``spiffe://<cluster>`` URI)."""
    for uri in sans(ca).get_values_for_type(x509.UniformResourceIdentifier):
        if uri.startswith("spiffe://") and "/" not in uri.removeprefix("spiffe://"):
            return uri.removeprefix("spiffe://")
    raise Refused("malformed", "the CA names no trust domain (spiffe://<cluster>)")


def identity_of(cert: x509.Certificate) -> Identity:
    uris = [u for u in sans(cert).get_values_for_type(x509.UniformResourceIdentifier)
            if u.count("/") == 4]
    if len(uris) != 1:
        raise Refused("identity", "the certificate names no single spiffe:// identity")
    return Identity.from_uri(uris[0])


def hosts_of(cert: x509.Certificate) -> tuple[str, ...]:
    return hosts_in(sans(cert))


# -- addresses ----------------------------------------------------------------------------------
def sans(cert: x509.Certificate) -> x509.SubjectAlternativeName:
    try:
        return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return x509.SubjectAlternativeName([])


def hosts_in(names: x509.SubjectAlternativeName) -> tuple[str, ...]:
    dns = names.get_values_for_type(x509.DNSName)
    ips = [str(ip) for ip in names.get_values_for_type(x509.IPAddress)]
    return tuple(sorted({*dns, *ips}))


def host_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return x509.DNSName(host)
