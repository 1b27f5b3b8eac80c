"""Every packet carries a truncated HMAC-SHA256 under a key derived from the cluster secret."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from bodega.registry.membership.auth import TAG_SIZE, AuthError, PacketAuth
from bodega.runtime.keys import derive_key


def test_sealed_packets_open_with_the_same_secret() -> None:
    auth = PacketAuth.from_secret("s3cret")
    packet = auth.seal(b'{"t":"gossip"}')
    assert len(packet) == TAG_SIZE + 14
    assert auth.open(packet) == b'{"t":"gossip"}'


def test_the_tag_is_hmac_sha256_truncated_under_the_gossip_key() -> None:
    key = derive_key("s3cret", "gossip")
    packet = PacketAuth.from_secret("s3cret").seal(b"payload")
    assert packet[:TAG_SIZE] == hmac.new(key, b"payload", hashlib.sha256).digest()[:16]
    assert key != b"s3cret"  # the secret itself never keys the wire


@pytest.mark.parametrize("tamper", [
    lambda p: PacketAuth.from_secret("other").seal(p[TAG_SIZE:]),  # wrong cluster key
    lambda p: p[:-1] + bytes([p[-1] ^ 1]),  # payload bit flipped
    lambda p: bytes([p[0] ^ 0x80]) + p[1:],  # tag bit flipped
    lambda p: p[:TAG_SIZE - 1],  # shorter than a tag
    lambda p: p[TAG_SIZE:],  # tag stripped
    lambda p: p + b"x",  # trailing byte
])
def test_anything_else_is_rejected(tamper: object) -> None:
    auth = PacketAuth.from_secret("s3cret")
    packet = auth.seal(b'{"t":"ack","f":"a","s":1}')
    with pytest.raises(AuthError):
        auth.open(tamper(packet))  # type: ignore[operator]


def test_an_empty_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="secret"):
        PacketAuth.from_secret("")
