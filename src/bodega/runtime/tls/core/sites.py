"""Certificates the edge serves to clients, one per hostname: pure functions.

Unlike a component's certificate (``pki.py``: a SPIFFE identity, client and
server use), a site certificate names hostnames only and is for serving:
``*.localhost`` for every app of a local cluster, ``www.example.com`` for one
app. The cluster CA issues them (``issue``), or an operator brings one
(``check_pair``: a PEM chain and its key, checked before anything is kept).
Imported keys may be EC or RSA, as browsers accept both.

Nothing here reads a file, a clock or a socket: callers pass ``now``.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bodega.runtime.tls.core.identity import Key, Refused, cert_pem, fingerprint, key_pem, new_key

SITE_LIFETIME = 90 * 86400.0  # as public CAs issue them; `bodega certs add` again renews
MAX_CHAIN = 64 * 1024
# A hostname: labels of letters, digits and hyphens, or a wildcard first label.
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_HOSTNAME = re.compile(rf"(\*\.)?({_LABEL}\.)*{_LABEL}")


@dataclass(frozen=True)
class SiteCertificate:
    """What the edge serves for a hostname: a key and its chain (leaf first), as PEM."""

    key_pem: bytes
    chain_pem: bytes
    info: SiteInfo


@dataclass(frozen=True)
class SiteInfo:
    hostnames: tuple[str, ...]  # the names the leaf covers (its DNS SANs)
    issuer: str
    not_before: datetime.datetime
    not_after: datetime.datetime
    fingerprint: str
    self_signed: bool


def check_hostname(hostname: str) -> str:
    """``hostname`` in lower case, or ``Refused`` saying what a hostname may be."""
    name = hostname.strip().lower().rstrip(".")
    if len(name) > 253 or not _HOSTNAME.fullmatch(name):
        raise Refused("hostname", f"{hostname[:80]!r} is not a hostname (letters, digits, "
                                  "hyphens and dots; a leading *. for a wildcard)")
    return name


def covers(pattern: str, hostname: str) -> bool:
    """Whether a certificate name (``*.example.com`` or exact) covers ``hostname``."""
    if pattern.startswith("*."):
        head, _, rest = hostname.partition(".")
        return bool(head) and rest == pattern[2:]
    return pattern == hostname


def issue(ca: x509.Certificate, ca_key: Key, hostnames: tuple[str, ...],
          now: datetime.datetime, lifetime: float = SITE_LIFETIME) -> SiteCertificate:
    """A new key and a certificate for ``hostnames`` signed by the cluster CA."""
    names = tuple(check_hostname(h) for h in hostnames)
    if not names:
        raise Refused("hostname", "a certificate needs at least one hostname")
    key = new_key()
    not_after = min(now + datetime.timedelta(seconds=lifetime), ca.not_valid_after_utc)
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=False, crl_sign=False,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    chain = cert_pem(leaf) + cert_pem(ca)
    return SiteCertificate(key_pem(key), chain, describe(leaf))


def check_pair(chain_pem: bytes, private_key_pem: bytes, hostname: str,
               now: datetime.datetime) -> SiteCertificate:
    """An imported chain and key, if they can serve ``hostname`` now; ``Refused`` saying why."""
    if len(chain_pem) > MAX_CHAIN or len(private_key_pem) > MAX_CHAIN:
        raise Refused("malformed", f"a certificate or key over {MAX_CHAIN // 1024} KiB")
    try:
        chain = x509.load_pem_x509_certificates(chain_pem)
    except ValueError as exc:
        raise Refused("malformed", f"the certificate is not PEM: {exc}") from None
    try:
        key = serialization.load_pem_private_key(private_key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise Refused("malformed", f"the key is not an unencrypted PEM private key: {exc}"
                      ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise Refused("malformed", "the key is neither EC nor RSA")
    leaf = chain[0]
    if leaf.public_key() != key.public_key():
        raise Refused("malformed", "the key is not the certificate's (the leaf comes first)")
    info = describe(leaf)
    name = check_hostname(hostname)
    if not any(covers(pattern, name) for pattern in info.hostnames):
        covered = ", ".join(info.hostnames) or "no DNS name"
        raise Refused("hostname", f"the certificate covers {covered}, not {name}")
    if now > info.not_after:
        raise Refused("expired", f"the certificate expired at {info.not_after:%Y-%m-%d %H:%M}Z")
    plain_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
    return SiteCertificate(plain_key, b"".join(cert_pem(c) for c in chain), info)


def describe(leaf: x509.Certificate) -> SiteInfo:
    try:
        sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = tuple(n.lower() for n in sans.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        names = ()
    return SiteInfo(hostnames=names, issuer=leaf.issuer.rfc4514_string(),
                    not_before=leaf.not_valid_before_utc, not_after=leaf.not_valid_after_utc,
                    fingerprint=fingerprint(leaf), self_signed=leaf.issuer == leaf.subject)


def info_of(chain_pem: bytes) -> SiteInfo:
    return describe(x509.load_pem_x509_certificates(chain_pem)[0])


def self_signed(hostnames: tuple[str, ...], now: datetime.datetime,
                lifetime: float = SITE_LIFETIME) -> SiteCertificate:
    """A certificate signed by its own key: what a proxy serves when it was given none
    (fly.toml's ``default_self_signed``); clients must be told to skip verification."""
    key = new_key()
    names = tuple(check_hostname(h) for h in hostnames)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(seconds=lifetime))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return SiteCertificate(key_pem(key), cert_pem(cert), describe(cert))


def key_type(chain_pem: bytes) -> str:
    """``rsa`` or ``ecdsa``: the kind of key the chain's leaf certifies."""
    leaf = x509.load_pem_x509_certificates(chain_pem)[0]
    return "rsa" if isinstance(leaf.public_key(), rsa.RSAPublicKey) else "ecdsa"
