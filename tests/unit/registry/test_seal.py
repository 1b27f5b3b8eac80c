"""A sealed packet: AES-256-GCM under a keyring key, its header authenticated with it."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from bodega.registry.membership.seal import (
    AAD_BYTES,
    HEADER_BYTES,
    OVERHEAD,
    Dropped,
    Header,
    open_sealed,
    read_header,
    seal,
    sender_id,
)
from tests.keyring_kit import KEYRING, other_keyring

KEY = KEYRING.primary_key
AEAD = AESGCM(KEY.secret)


def header(seq: int = 7, generation: int = 3, sender: str = "w1") -> Header:
    return Header(KEY.raw_id, sender_id(sender), generation, seq, os.urandom(12))


def test_a_sealed_packet_opens_to_its_payload_and_says_who_sent_it_when() -> None:
    sent = header(seq=2**63 + 5, generation=9)
    packet = seal(AEAD, sent, b'{"t":"gossip","f":"w1"}')
    assert len(packet) == OVERHEAD + len(b'{"t":"gossip","f":"w1"}')
    got = read_header(packet)
    assert got == sent
    assert open_sealed(AEAD, got, packet) == b'{"t":"gossip","f":"w1"}'


def test_the_payload_and_the_sender_are_not_on_the_wire_in_the_clear() -> None:
    packet = seal(AEAD, header(), b'{"t":"gossip","f":"a-member-name"}')
    assert b"a-member-name" not in packet
    assert b"gossip" not in packet


def test_the_same_payload_sealed_twice_differs() -> None:
    assert seal(AEAD, header(), b"same") != seal(AEAD, header(), b"same")


@pytest.mark.parametrize("tamper", [
    lambda p: p[:1] + bytes([p[1] ^ 1]) + p[2:],  # key id: now a key nobody holds
    lambda p: p[:5] + bytes([p[5] ^ 1]) + p[6:],  # sender
    lambda p: p[:13] + bytes([p[13] ^ 1]) + p[14:],  # generation
    lambda p: p[:28] + bytes([p[28] ^ 1]) + p[29:],  # seq
    lambda p: p[:AAD_BYTES] + bytes([p[AAD_BYTES] ^ 1]) + p[AAD_BYTES + 1:],  # nonce
    lambda p: p[:HEADER_BYTES] + bytes([p[HEADER_BYTES] ^ 1]) + p[HEADER_BYTES + 1:],  # body
    lambda p: p[:-1] + bytes([p[-1] ^ 1]),  # tag
    lambda p: p[:-1],  # truncated
    lambda p: p + b"x",  # a byte appended
])
def test_a_changed_byte_anywhere_fails_the_tag(tamper: Callable[[bytes], bytes]) -> None:
    packet = tamper(seal(AEAD, header(), b'{"t":"ack","f":"w1","s":1}'))
    with pytest.raises(Dropped) as dropped:
        open_sealed(AEAD, read_header(packet), packet)
    assert dropped.value.reason == "auth"


def test_another_clusters_key_does_not_open_it() -> None:
    packet = seal(AEAD, header(), b"payload")
    other = AESGCM(other_keyring("another cluster").primary_key.secret)
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
    packet = seal(AEAD, sent, payload)
    assert read_header(packet) == sent
    assert open_sealed(AEAD, sent, packet) == payload
    bit = flip % (len(packet) * 8)
    bad = bytearray(packet)
    bad[bit // 8] ^= 1 << bit % 8
    with pytest.raises(Dropped):
        open_sealed(AEAD, read_header(bytes(bad)), bytes(bad))


def test_sender_ids_are_fixed_size_and_differ_by_name() -> None:
    assert len(sender_id("w1")) == len(sender_id("n" * 64)) == 8
    assert sender_id("w1") != sender_id("w2")
    assert sender_id("w1") == sender_id("w1")
