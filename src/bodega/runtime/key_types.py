"""The secret key types of the Machines API, and what each key does with bytes.

An app's secret keys (``/v1/apps/{app}/secretkeys``) are used where they are kept:
clients send plaintext and get ciphertext or a signature back, and the key's
material never leaves the cluster. The types are fly-go's names:

- ``hs256``, ``hs384``, ``hs512``: HMAC-SHA-2; sign, verify; 1-1024 bytes of material
  (generated: the hash's size).
- ``nacl_auth``: HMAC-SHA-512-256 (NaCl's ``crypto_auth``); sign, verify; 32 bytes.
- ``nacl_sign``: Ed25519 (NaCl's ``crypto_sign``, detached signatures); sign, verify, and
  a public key; a 32-byte seed, or NaCl's 64 bytes (seed, then public key).
- ``xaes256gcm``: XAES-256-GCM (C2SP) with 24-byte random nonces; encrypt, decrypt;
  32 bytes.

``nacl_box`` and ``nacl_secretbox`` (XSalsa20-Poly1305) are named but refused: the
``cryptography`` library bodega uses has no XSalsa20. A ciphertext is the nonce
followed by the sealed bytes and their tag. Everything here is pure but for the
random bytes a key or a nonce is drawn from.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import cmac, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.ciphers import algorithms
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

HMAC_HASHES = {"hs256": "sha256", "hs384": "sha384", "hs512": "sha512"}
SIGNING = (*HMAC_HASHES, "nacl_auth", "nacl_sign")
ENCRYPTING = ("xaes256gcm",)
KNOWN = (*SIGNING, *ENCRYPTING)
UNSUPPORTED = ("nacl_box", "nacl_secretbox")
XAES_NONCE = 24
MAX_HMAC_KEY = 1024


class KeyRefused(ValueError):
    """A key, or a use of one, that cannot be: the message says why, never the material."""


@dataclass(frozen=True)
class KeyMaterial:
    type: str
    material: bytes

    def public_key(self) -> bytes | None:
        if self.type != "nacl_sign":
            return None
        return _ed25519(self.material).public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def check_type(key_type: str) -> None:
    if key_type in UNSUPPORTED:
        raise KeyRefused(f"key type {key_type} (XSalsa20-Poly1305) is not available in this "
                         f"build; use one of {', '.join(KNOWN)}")
    if key_type not in KNOWN:
        raise KeyRefused(f"unknown key type {key_type[:40]!r}: one of {', '.join(KNOWN)}")


def from_value(key_type: str, value: bytes) -> KeyMaterial:
    """A key of ``key_type`` from material a client set; refused if it cannot be one."""
    check_type(key_type)
    if key_type in HMAC_HASHES:
        if not 1 <= len(value) <= MAX_HMAC_KEY:
            raise KeyRefused(f"a {key_type} key is 1 to {MAX_HMAC_KEY} bytes, not {len(value)}")
    elif key_type == "nacl_sign":
        if len(value) == 64:
            seed, public = value[:32], value[32:]
            if KeyMaterial(key_type, seed).public_key() != public:
                raise KeyRefused("a 64-byte nacl_sign key is its seed then its public key, "
                                 "and this public key is not the seed's")
            value = seed
        elif len(value) != 32:
            raise KeyRefused(f"a nacl_sign key is a 32-byte seed (or 64 bytes: seed and "
                             f"public key), not {len(value)} bytes")
    elif len(value) != 32:
        raise KeyRefused(f"a {key_type} key is 32 bytes, not {len(value)}")
    return KeyMaterial(key_type, value)


def generate(key_type: str) -> KeyMaterial:
    check_type(key_type)
    size = hashlib.new(HMAC_HASHES[key_type]).digest_size if key_type in HMAC_HASHES else 32
    return KeyMaterial(key_type, os.urandom(size))


def sign(key: KeyMaterial, message: bytes) -> bytes:
    _must(key, SIGNING, "signs and verifies")
    if key.type == "nacl_sign":
        return _ed25519(key.material).sign(message)
    return _mac(key, message)


def verify(key: KeyMaterial, message: bytes, signature: bytes) -> bool:
    _must(key, SIGNING, "signs and verifies")
    if key.type == "nacl_sign":
        try:
            _ed25519(key.material).public_key().verify(signature, message)
        except InvalidSignature:
            return False
        return True
    return hmac.compare_digest(_mac(key, message), signature)


def encrypt(key: KeyMaterial, plaintext: bytes, associated: bytes = b"") -> bytes:
    _must(key, ENCRYPTING, "encrypts and decrypts")
    nonce = os.urandom(XAES_NONCE)
    return nonce + xaes_seal(key.material, nonce, plaintext, associated)


def decrypt(key: KeyMaterial, ciphertext: bytes, associated: bytes = b"") -> bytes:
    _must(key, ENCRYPTING, "encrypts and decrypts")
    if len(ciphertext) < XAES_NONCE + 16:
        raise KeyRefused("the ciphertext is shorter than a nonce and a tag")
    try:
        return xaes_open(key.material, ciphertext[:XAES_NONCE], ciphertext[XAES_NONCE:],
                         associated)
    except InvalidTag:
        raise KeyRefused("the ciphertext does not open with this key (wrong key, associated "
                         "data or tampered bytes)") from None


def xaes_seal(key: bytes, nonce: bytes, plaintext: bytes, associated: bytes) -> bytes:
    return AESGCM(_xaes_key(key, nonce)).encrypt(nonce[12:], plaintext, associated or None)


def xaes_open(key: bytes, nonce: bytes, sealed: bytes, associated: bytes) -> bytes:
    return AESGCM(_xaes_key(key, nonce)).decrypt(nonce[12:], sealed, associated or None)


def _xaes_key(key: bytes, nonce: bytes) -> bytes:
    """XAES-256-GCM's derived key: AES-CMAC of two one-block messages naming the nonce's
    first 12 bytes (for one full block, CMAC is exactly the spec's AES(M xor K1))."""
    halves = []
    for counter in (1, 2):
        mac = cmac.CMAC(algorithms.AES(key))
        mac.update(bytes([0, counter]) + b"X\x00" + nonce[:12])
        halves.append(mac.finalize())
    return b"".join(halves)


def _mac(key: KeyMaterial, message: bytes) -> bytes:
    if key.type == "nacl_auth":
        return hmac.new(key.material, message, hashlib.sha512).digest()[:32]
    return hmac.new(key.material, message, HMAC_HASHES[key.type]).digest()


def _ed25519(seed: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(seed)


def _must(key: KeyMaterial, types: tuple[str, ...], what: str) -> None:
    if key.type not in types:
        does = "signs and verifies" if key.type in SIGNING else "encrypts and decrypts"
        raise KeyRefused(f"a {key.type} key {does}; a key that {what} is one of "
                         f"{', '.join(types)}")
