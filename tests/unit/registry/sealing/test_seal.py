"""A sealed packet: AES-256-GCM under a keyring key, its header authenticated with it."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from bodega.registry.sealing.core.seal import (
    HEADER_BYTES,
    OVERHEAD,
    Dropped,
    Header,
    life_key,
    open_sealed,
    read_header,
    seal,
    sender_id,
)
from tests.keyring_kit import KEYRING, other_keyring

KEY = KEYRING.primary_key
SALT = os.urandom(8)


def header(seq: int = 7, generation: int = 3, sender: str = "w1", salt: bytes = SALT) -> Header:
    return Header(KEY.raw_id, sender_id(sender), generation, salt, seq)


def key_of(sent: Header, secret: bytes = KEY.secret) -> AESGCM:
    return life_key(secret, sent.life)


def test_a_sealed_packet_opens_to_its_payload_and_says_who_sent_it_when() -> None:
    sent = header(seq=2**63 + 5, generation=9)
    packet = seal(key_of(sent), sent, b'{"t":"gossip","f":"w1"}')
    assert len(packet) == OVERHEAD + len(b'{"t":"gossip","f":"w1"}')
    assert OVERHEAD == 53
    got = read_header(packet)
    assert got == sent
    assert open_sealed(key_of(got), got, packet) == b'{"t":"gossip","f":"w1"}'


def test_the_payload_and_the_sender_are_not_on_the_wire_in_the_clear() -> None:
    packet = seal(key_of(header()), header(), b'{"t":"gossip","f":"a-member-name"}')
    assert b"a-member-name" not in packet
    assert b"gossip" not in packet


def test_each_sender_life_seals_under_a_key_of_its_own() -> None:
    """The nonce is the sequence number: unique within a life, and lives never share a key."""
    one, other = header(seq=1), header(seq=1, salt=os.urandom(8))
    assert seal(key_of(one), one, b"same") != seal(key_of(other), other, b"same")
    assert seal(key_of(one), one, b"same") != seal(key_of(one), header(seq=2), b"same")
    for life in (header(seq=1, generation=4), header(seq=1, sender="w2"), other):
        packet = seal(key_of(one), one, b"same")  # a life's packet claimed for another life
        forged = life.packed() + packet[HEADER_BYTES:]
        with pytest.raises(Dropped, match="bad tag"):
            open_sealed(key_of(life), life, forged)


@pytest.mark.parametrize("tamper", [
    lambda p: p[:1] + bytes([p[1] ^ 1]) + p[2:],  # key id: now a key nobody holds
    lambda p: p[:5] + bytes([p[5] ^ 1]) + p[6:],  # sender
    lambda p: p[:13] + bytes([p[13] ^ 1]) + p[14:],  # generation
    lambda p: p[:21] + bytes([p[21] ^ 1]) + p[22:],  # salt
    lambda p: p[:36] + bytes([p[36] ^ 1]) + p[37:],  # seq
    lambda p: p[:HEADER_BYTES] + bytes([p[HEADER_BYTES] ^ 1]) + p[HEADER_BYTES + 1:],  # body
    lambda p: p[:-1] + bytes([p[-1] ^ 1]),  # tag
    lambda p: p[:-1],  # truncated
    lambda p: p + b"x",  # a byte appended
])
def test_a_changed_byte_anywhere_fails_the_tag(tamper: Callable[[bytes], bytes]) -> None:
    packet = tamper(seal(key_of(header()), header(), b'{"t":"ack","f":"w1","s":1}'))
    got = read_header(packet)
    with pytest.raises(Dropped) as dropped:
        open_sealed(key_of(got), got, packet)  # the key its header names, if it were held
    assert dropped.value.reason == "auth"


def test_another_clusters_key_does_not_open_it() -> None:
    packet = seal(key_of(header()), header(), b"payload")
    other = key_of(header(), other_keyring("another cluster").primary_key.secret)
    with pytest.raises(Dropped, match="bad tag"):
        open_sealed(other, read_header(packet), packet)


@pytest.mark.parametrize("packet", [
    b"", b"not even close", b'{"t":"ping","f":"x","s":1}' + b" " * 40,
    bytes([2]) + b"\0" * 80,  # a later version of the format
])
def test_what_is_not_a_sealed_packet_is_refused_as_auth(packet: bytes) -> None:
    with pytest.raises(Dropped) as dropped:
        read_header(packet)
    assert dropped.value.reason == "auth"


@given(payload=st.binary(max_size=1400), seq=st.integers(0, 2**64 - 1),
       generation=st.integers(0, 2**64 - 1), flip=st.integers(0, 10_000))
@settings(max_examples=200, deadline=None)
def test_any_payload_round_trips_and_any_flipped_bit_is_caught(
        payload: bytes, seq: int, generation: int, flip: int) -> None:
    sent = header(seq=seq, generation=generation)
    packet = seal(key_of(sent), sent, payload)
    assert read_header(packet) == sent
    assert open_sealed(key_of(sent), sent, packet) == payload
    bit = flip % (len(packet) * 8)
    bad = bytearray(packet)
    bad[bit // 8] ^= 1 << bit % 8
    with pytest.raises(Dropped):
        opened(bytes(bad))


def opened(packet: bytes) -> bytes:
    """What a receiver holding the key would make of ``packet``."""
    got = read_header(packet)
    return open_sealed(key_of(got), got, packet)


def test_sender_ids_are_fixed_size_and_differ_by_name() -> None:
    assert len(sender_id("w1")) == len(sender_id("n" * 64)) == 8
    assert sender_id("w1") != sender_id("w2")
    assert sender_id("w1") == sender_id("w1")
