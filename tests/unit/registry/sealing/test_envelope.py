"""The envelope between two members: sealed with the primary, opened with any key, once."""

from __future__ import annotations

import itertools
import os

import pytest

from bodega.registry.sealing.core.envelope import SealedEnvelope
from bodega.registry.sealing.core.keyring import GossipKey, Keyring
from bodega.registry.sealing.core.seal import HEADER_BYTES, Dropped
from tests.keyring_kit import KEYRING, other_keyring

NEW = GossipKey(bytes(range(32)))


def envelope(name: str, keyring: Keyring = KEYRING, first_seq: int = 1000) -> SealedEnvelope:
    return SealedEnvelope(keyring, name, first_seq=first_seq, salts=os.urandom)


def received(by: SealedEnvelope, packet: bytes, sender: str) -> bytes:
    opened = by.open(packet)
    by.accept(opened, sender)
    return opened.payload


def reason(by: SealedEnvelope, packet: bytes, sender: str) -> str:
    with pytest.raises(Dropped) as dropped:
        received(by, packet, sender)
    return dropped.value.reason


def test_packets_go_through_once_and_a_replay_is_dropped() -> None:
    a, b = envelope("a"), envelope("b")
    first, second = a.seal(b"one", 1), a.seal(b"two", 1)
    assert received(b, second, "a") == b"two"
    assert received(b, first, "a") == b"one"  # reordered: still within the window
    assert reason(b, first, "a") == reason(b, second, "a") == "replay"


def test_sequence_numbers_count_up_from_the_first() -> None:
    a, b = envelope("a", first_seq=5), envelope("b")
    seqs = [b.open(a.seal(b"x", 1)).seq for _ in range(3)]
    assert seqs == [5, 6, 7]


def test_a_restarted_sender_gets_through_though_its_clock_went_back() -> None:
    b = envelope("b")
    old_life = envelope("a", first_seq=2_000_000)
    old_packet = old_life.seal(b"old", 1)
    received(b, old_packet, "a")
    new_life = envelope("a", first_seq=1_000)  # a lower first seq, the next generation
    assert received(b, new_life.seal(b"new", 2), "a") == b"new"
    assert reason(b, old_packet, "a") == "replay"
    assert reason(b, old_life.seal(b"late", 1), "a") == "replay"  # the earlier life


def test_another_clusters_key_is_unknown_and_a_forged_tag_is_auth() -> None:
    b = envelope("b")
    assert reason(b, envelope("x", other_keyring("elsewhere")).seal(b"hi", 1), "x") \
        == "unknown_key"
    packet = bytearray(envelope("a").seal(b"hi", 1))
    packet[-1] ^= 1
    assert reason(b, bytes(packet), "a") == "auth"


def test_a_message_naming_another_sender_than_its_seal_is_dropped_and_moves_nothing() -> None:
    a, b = envelope("a"), envelope("b")
    packet = a.seal(b"I am c", 1)
    assert reason(b, packet, "c") == "auth"
    assert received(b, packet, "a") == b"I am c"  # the refused claim left a's window alone


def test_during_a_rotation_old_and_new_keys_both_open_until_the_old_is_removed() -> None:
    a, b = envelope("a"), envelope("b")
    installed = KEYRING.install(NEW)
    b.set_keyring(installed)
    assert received(b, a.seal(b"old key", 1), "a") == b"old key"
    a.set_keyring(installed.use(NEW.id))
    assert a.keyring.primary == NEW.id
    sealed_new = a.seal(b"new key", 1)
    assert received(b, sealed_new, "a") == b"new key"
    b.set_keyring(installed.use(NEW.id).only_primary())
    assert reason(b, envelope("c").seal(b"old key", 1), "c") == "unknown_key"
    assert received(b, a.seal(b"still", 1), "a") == b"still"


def test_salts_come_from_the_source_handed_in_and_lives_never_share_a_key() -> None:
    counter = itertools.count()
    a = SealedEnvelope(KEYRING, "a", first_seq=1,
                       salts=lambda n: next(counter).to_bytes(n, "big"))
    b = envelope("b")
    packets = [a.seal(b"same", 1) for _ in range(3)]
    assert len(set(packets)) == 3
    assert [received(b, p, "a") for p in packets] == [b"same"] * 3
    # Same name, generation and first seq, another salt: a life of its own, another key.
    twin = SealedEnvelope(KEYRING, "a", first_seq=1,
                          salts=lambda n: next(counter).to_bytes(n, "big"))
    assert twin.seal(b"same", 1)[HEADER_BYTES:] != packets[0][HEADER_BYTES:]


def test_a_forged_life_opens_nothing_and_is_not_remembered() -> None:
    b = envelope("b")
    packet = bytearray(envelope("a").seal(b"x", 1))
    packet[21] ^= 1  # the salt: another life, whose key the sealer never used
    assert reason(b, bytes(packet), "a") == "auth"
    assert len(b._lives) == 0
