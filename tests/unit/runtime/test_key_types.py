"""The secret key types: known answers, round trips, and refusals that name the reason."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bodega.runtime import key_types
from bodega.runtime.key_types import KeyMaterial, KeyRefused


def test_xaes256gcm_matches_the_c2sp_test_vector() -> None:
    sealed = key_types.xaes_seal(b"\x01" * 32, b"ABCDEFGHIJKLMNOPQRSTUVWX", b"XAES-256-GCM", b"")
    assert sealed.hex() == "ce546ef63c9cc60765923609b33a9a1974e96e52daf2fcf7075e2271"


def test_xaes_round_trip_binds_the_associated_data_and_draws_a_fresh_nonce() -> None:
    key = key_types.generate("xaes256gcm")
    one, two = (key_types.encrypt(key, b"hello", b"ctx") for _ in range(2))
    assert one != two
    assert len(one) == 24 + 5 + 16
    assert key_types.decrypt(key, one, b"ctx") == b"hello"
    with pytest.raises(KeyRefused, match="does not open"):
        key_types.decrypt(key, one, b"other")
    with pytest.raises(KeyRefused, match="does not open"):
        key_types.decrypt(key_types.generate("xaes256gcm"), one, b"ctx")
    with pytest.raises(KeyRefused, match="shorter"):
        key_types.decrypt(key, b"\x00" * 10)


@pytest.mark.parametrize(("kind", "digest", "size"), [
    ("hs256", hashlib.sha256, 32), ("hs384", hashlib.sha384, 48), ("hs512", hashlib.sha512, 64)])
def test_hmac_keys_sign_as_hmac_does(kind: str, digest: str, size: int) -> None:
    key = key_types.from_value(kind, b"k" * 20)
    signature = key_types.sign(key, b"message")
    assert signature == hmac.new(b"k" * 20, b"message", digest).digest()
    assert key_types.verify(key, b"message", signature)
    assert not key_types.verify(key, b"messagf", signature)
    assert len(key_types.generate(kind).material) == size


def test_nacl_auth_is_hmac_sha512_truncated() -> None:
    key = key_types.from_value("nacl_auth", bytes(range(32)))
    expected = hmac.new(bytes(range(32)), b"m", hashlib.sha512).digest()[:32]
    assert key_types.sign(key, b"m") == expected


def test_nacl_sign_signs_with_ed25519_and_publishes_its_public_key() -> None:
    key = key_types.generate("nacl_sign")
    public = key.public_key()
    assert public is not None
    assert len(public) == 32
    signature = key_types.sign(key, b"payload")
    Ed25519PublicKey.from_public_bytes(public).verify(signature, b"payload")  # raises if bad
    assert not key_types.verify(key, b"payloaD", signature)
    # NaCl's 64-byte form (seed, then public key) is the same key; a mismatched one is refused.
    assert key_types.from_value("nacl_sign", key.material + public).material == key.material
    with pytest.raises(KeyRefused, match="not the seed's"):
        key_types.from_value("nacl_sign", key.material + bytes(32))


def test_uses_a_type_does_not_have_and_bad_material_are_refused() -> None:
    mac = KeyMaterial("hs256", b"k")
    with pytest.raises(KeyRefused, match="hs256 key signs and verifies"):
        key_types.encrypt(mac, b"x")
    with pytest.raises(KeyRefused, match="encrypts and decrypts"):
        key_types.sign(key_types.generate("xaes256gcm"), b"x")
    with pytest.raises(KeyRefused, match="32 bytes, not 3"):
        key_types.from_value("xaes256gcm", b"abc")
    with pytest.raises(KeyRefused, match="1 to 1024"):
        key_types.from_value("hs256", b"")
    with pytest.raises(KeyRefused, match="not available in this build"):
        key_types.generate("nacl_secretbox")
    with pytest.raises(KeyRefused, match="unknown key type"):
        key_types.generate("rsa")
