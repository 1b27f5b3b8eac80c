"""The keyring: install, use, remove; its JSON; what a member reports of it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bodega.registry.sealing.core.keyring import (
    GossipKey,
    KeyReport,
    Keyring,
    KeyringError,
)


def key(n: int) -> GossipKey:
    return GossipKey(bytes([n]) * 32)


def test_a_new_keyring_has_one_key_and_seals_with_it() -> None:
    ring = Keyring.of(key(1))
    assert ring.ids == (key(1).id,)
    assert ring.primary == key(1).id
    assert ring.primary_key == key(1)
    assert ring.serial == 0


def test_a_rotation_is_install_use_remove() -> None:
    old, new = key(1), key(2)
    ring = Keyring.of(old)
    installed = ring.install(new)
    assert installed.ids == (old.id, new.id)
    assert installed.primary == old.id
    used = installed.use(new.id)
    assert used.primary == new.id
    removed = used.remove(old.id)
    assert removed.ids == (new.id,)
    assert [r.serial for r in (ring, installed, used, removed)] == [0, 1, 2, 3]


def test_moves_that_change_nothing_keep_the_serial() -> None:
    ring = Keyring.of(key(1)).install(key(2))
    assert ring.install(key(2)) is ring
    assert ring.use(ring.primary) is ring
    assert ring.remove(key(9).id) is ring


def test_the_primary_cannot_be_removed_nor_a_missing_key_used() -> None:
    ring = Keyring.of(key(1))
    with pytest.raises(KeyringError, match="is the primary"):
        ring.remove(key(1).id)
    with pytest.raises(KeyringError, match="install it first"):
        ring.use(key(2).id)


@pytest.mark.parametrize(("keys", "primary", "why"), [
    ((), "x", "at least one key"),
    ((key(1), key(1)), key(1).id, "each key once"),
    ((key(1),), key(2).id, "not installed"),
    (tuple(key(i) for i in range(9)), key(0).id, "at most"),
])
def test_a_keyring_that_cannot_be_is_refused(keys: tuple[GossipKey, ...], primary: str,
                                            why: str) -> None:
    with pytest.raises(KeyringError, match=why):
        Keyring(keys, primary)


def test_a_key_is_32_bytes_and_its_id_reveals_nothing_of_it() -> None:
    with pytest.raises(KeyringError, match="32 bytes"):
        GossipKey(b"short")
    assert len(key(1).id) == 8
    assert key(1).id not in key(1).secret.hex()
    assert key(1).id != key(2).id
    assert "secret" not in repr(key(1))
    assert key(1).secret.hex() not in repr(key(1))


def test_json_round_trips_and_bad_json_says_what_is_wrong() -> None:
    ring = Keyring.of(key(1)).install(key(2)).use(key(2).id)
    assert Keyring.from_json(ring.to_json()) == ring
    doc = json.loads(ring.to_json())
    assert doc == {"serial": 2, "primary": key(2).id,
                   "keys": [key(1).encoded(), key(2).encoded()]}
    with pytest.raises(KeyringError, match="primary"):
        Keyring.from_json(json.dumps({"keys": [key(1).encoded()]}))
    with pytest.raises(KeyringError, match="32 bytes in base64"):
        Keyring.from_json(json.dumps({"primary": "x", "keys": ["not base64!"]}))
    with pytest.raises(KeyringError, match="secret: Extra inputs"):
        Keyring.from_json(json.dumps({**doc, "secret": "x"}))
    with pytest.raises(KeyringError):
        Keyring.from_json("not json")


def test_a_member_reports_ids_with_its_primary_starred() -> None:
    ring = Keyring.of(key(1)).install(key(2))
    assert ring.report() == f"{key(1).id}*,{key(2).id}"
    assert KeyReport.parse(ring.report()) == KeyReport(frozenset(ring.ids), key(1).id)
    assert KeyReport.parse(None) == KeyReport()
    assert KeyReport.parse("") == KeyReport()


MOVES = st.lists(st.tuples(st.sampled_from(["install", "use", "remove"]), st.integers(0, 5)),
                 max_size=40)


@given(MOVES)
@settings(max_examples=300, deadline=None)
def test_any_sequence_of_moves_keeps_a_keyring_sound(moves: list[tuple[str, int]]) -> None:
    """Whatever is asked: the primary is installed, keys are unique, a change raises the
    serial, a refused move changes nothing, and the JSON form and report stay faithful."""
    ring = Keyring.of(key(0))
    for move, n in moves:
        before = ring
        try:
            if move == "install":
                ring = ring.install(key(n))
            elif move == "use":
                ring = ring.use(key(n).id)
            else:
                ring = ring.remove(key(n).id)
        except KeyringError:
            assert ring == before
            continue
        assert ring.primary in ring.ids
        assert len(set(ring.ids)) == len(ring.ids)
        assert ring.serial == before.serial + (0 if ring == before else 1)
        assert Keyring.from_json(ring.to_json()) == ring
        report = KeyReport.parse(ring.report())
        assert report.installed == frozenset(ring.ids)
        assert report.primary == ring.primary
