"""Where TLS material lives on disk, and how it is written: private, whole, at once.

A component's TLS directory (``<its data dir>/tls`` by default) holds two files:

- ``ca.pem``: the cluster CA's certificate, the one every peer is checked against;
- ``identity.pem``: the component's private key followed by its certificate
  (mode 0600). One file, replaced atomically, so a renewal can never leave a
  key beside a certificate that is not its own.

The CA itself lives in ``<bodega up's data dir>/tls``: ``ca.pem`` and
``ca-key.pem`` (0600), on the host that made it only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from bodega.runtime.tls.core.identity import Key, Refused, cert_pem, key_pem, load_cert, load_key

CA_CERT = "ca.pem"
CA_KEY = "ca-key.pem"
IDENTITY = "identity.pem"


class TlsMissing(FileNotFoundError):
    """A TLS directory without what a component needs; the message says what and where."""


def write_private(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` atomically, readable by its owner only (or ``mode``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_ca_file(path: Path | None, option: str) -> str | None:
    """The PEM of a CA certificate a command was given by ``option`` (a flag; None: not
    given), read once as it starts; ValueError naming the flag, the file and what is wrong
    with it (unreadable, or holding no certificate), not a failed TLS handshake later."""
    if path is None:
        return None
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"{option} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        text = ""
    try:
        x509.load_pem_x509_certificates(text.encode())
    except ValueError:
        raise ValueError(f"{option} {path}: not a PEM certificate") from None
    return text


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise TlsMissing(f"no {what} at {path}") from None


@dataclass(frozen=True)
class TlsDir:
    """One component's TLS directory."""

    path: Path

    @property
    def ca_path(self) -> Path:
        return self.path / CA_CERT

    @property
    def identity_path(self) -> Path:
        return self.path / IDENTITY

    def complete(self) -> bool:
        return self.ca_path.exists() and self.identity_path.exists()

    def read_ca(self) -> x509.Certificate:
        return load_cert(_read(self.ca_path, "cluster CA certificate"))

    def read_identity(self) -> tuple[Key, x509.Certificate]:
        """The component's key and certificate; ``Refused`` if they are not a pair."""
        pem = _read(self.identity_path, "key and certificate")
        key, cert = load_key(pem), load_cert(pem)
        if key.public_key() != cert.public_key():
            raise Refused("malformed", f"{self.identity_path}: the key is not the "
                                       "certificate's")
        return key, cert

    def write_ca(self, ca: x509.Certificate) -> None:
        write_private(self.ca_path, cert_pem(ca), 0o644)

    def write_identity(self, key: Key, cert: x509.Certificate) -> None:
        write_private(self.identity_path, key_pem(key) + cert_pem(cert))


@dataclass(frozen=True)
class CaDir:
    """Where the cluster CA is kept: its certificate, and its key (0600)."""

    path: Path

    @property
    def cert_path(self) -> Path:
        return self.path / CA_CERT

    @property
    def key_path(self) -> Path:
        return self.path / CA_KEY

    def exists(self) -> bool:
        return self.cert_path.exists() and self.key_path.exists()

    def read(self) -> tuple[x509.Certificate, Key]:
        cert = load_cert(_read(self.cert_path, "cluster CA certificate"))
        key = load_key(_read(self.key_path, "cluster CA key"))
        if key.public_key() != cert.public_key():
            raise Refused("malformed", f"{self.key_path} is not the key of {self.cert_path}")
        return cert, key

    def write(self, cert: x509.Certificate, key: Key) -> None:
        write_private(self.key_path, key_pem(key))
        write_private(self.cert_path, cert_pem(cert), 0o644)
