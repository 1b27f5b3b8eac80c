"""App secrets sealed at rest: AES-GCM under a key derived from the cluster's secrets key (HKDF).

A sealed value is ``v1.<base64(nonce | ciphertext+tag)>``; the associated
data is ``<app>/<name>``, so a sealed value moved to another app or name
does not open. Brokers and workers hold the secrets key (``bodega up``
keeps it in ``<data dir>/secrets-key``; proxies never get it), so any broker
can seal and any worker can open; the registry, its files and its gossip
only ever carry sealed values. A data dir from before the secrets key had
one cluster secret for everything: it becomes the secrets key, and the same
derivation keeps every value sealed under it readable.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PREFIX = "v1."
NONCE_BYTES = 12


class SecretUnreadable(ValueError):
    """A sealed value that does not open with this cluster's key (or was tampered with)."""


def _hkdf(key: str, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"bodega-secrets",
                info=info).derive(key.encode())


class SecretBox:
    def __init__(self, key: str) -> None:
        if not key:
            raise ValueError("an empty secrets key seals nothing")
        self._aead = AESGCM(_hkdf(key, b"bodega/app-secrets/aes-gcm/v1"))
        self._digest_key = _hkdf(key, b"bodega/app-secrets/digest/v1")

    def seal(self, app: str, name: str, value: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, value.encode(), f"{app}/{name}".encode())
        return PREFIX + base64.b64encode(nonce + sealed).decode()

    def open(self, app: str, name: str, sealed: str) -> str:
        if not sealed.startswith(PREFIX):
            raise SecretUnreadable(f"secret {name} of {app}: unknown format")
        try:
            raw = base64.b64decode(sealed[len(PREFIX):], validate=True)
            plain = self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:],
                                       f"{app}/{name}".encode())
        except (InvalidTag, ValueError) as exc:
            raise SecretUnreadable(f"secret {name} of {app} does not open with this "
                                   "cluster's key") from exc
        return plain.decode()

    def digest(self, app: str, name: str, value: str) -> str:
        """A keyed digest: tells two values apart without letting anyone guess them offline."""
        mac = hmac.new(self._digest_key, f"{app}/{name}\x00{value}".encode(), hashlib.sha256)
        return mac.hexdigest()[:16]
