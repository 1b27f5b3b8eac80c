"""Join tokens: the CA pin, expiry, revocation, and the subnets joined workers get."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from bodega.runtime.tls import pki
from bodega.runtime.tls.identity import new_key
from bodega.runtime.tls.join_store import JoinStore
from bodega.runtime.tls.join_token import (
    JoinRefused,
    JoinToken,
    TokenRecord,
    admit,
    ca_hash,
    free_subnets,
)

NOW = datetime.datetime(2026, 11, 24, 12, 0, tzinfo=datetime.UTC)
CA = pki.make_ca("c1abc", new_key(), NOW)
OTHER_CA = pki.make_ca("c1abc", new_key(), NOW)


def test_a_token_pins_the_ca_and_reads_back_as_written() -> None:
    token = JoinToken.new(CA)
    text = str(token)
    assert text.startswith("K10" + ca_hash(CA) + "::")
    assert JoinToken.parse(text) == token
    assert ca_hash(CA) != ca_hash(OTHER_CA)
    for bad in ("", "K10abc::1234.secret", text.replace("K10", "K11"), text[:-25] + "!" * 25):
        with pytest.raises(ValueError, match="not a join token"):
            JoinToken.parse(bad)


def test_admit_takes_a_valid_token_and_says_why_it_refuses_the_rest() -> None:
    token = JoinToken.new(CA)
    record = TokenRecord.of(token, NOW, 3600.0)
    records = {token.id: record}
    assert admit(records, token, ca_hash(CA), NOW) == record
    with pytest.raises(JoinRefused, match="another cluster CA"):
        admit(records, token, ca_hash(OTHER_CA), NOW)
    with pytest.raises(JoinRefused, match="expired"):
        admit(records, token, ca_hash(CA), NOW + datetime.timedelta(hours=1))
    revoked = {token.id: record.model_copy(update={"revoked": NOW})}
    with pytest.raises(JoinRefused, match="revoked"):
        admit(revoked, token, ca_hash(CA), NOW)
    guessed = JoinToken(token.ca_hash, token.id, "x" * 32)
    with pytest.raises(JoinRefused, match="not one of this cluster's"):
        admit(records, guessed, ca_hash(CA), NOW)
    with pytest.raises(JoinRefused, match="not one of this cluster's"):
        admit({}, token, ca_hash(CA), NOW)
    assert record.status(NOW) == "valid"
    assert record.status(NOW + datetime.timedelta(hours=2)) == "expired"
    assert "secret" not in record.model_dump_json().replace("secret_sha256", "")
    assert token.secret not in record.model_dump_json()


def test_free_subnets_skip_what_is_taken_and_say_when_the_pool_runs_out() -> None:
    assert free_subnets("10.9.128.0/22", ["10.9.129.0/24"], 2) == ["10.9.128.0/24",
                                                                    "10.9.130.0/24"]
    with pytest.raises(ValueError, match="1 free /24s left, 2 asked for"):
        free_subnets("10.9.128.0/23", ["10.9.128.0/24"], 2)


def test_the_store_keeps_hashes_assigns_stable_subnets_and_revokes(tmp_path: Path) -> None:
    clock = [NOW]
    store = JoinStore(tmp_path / "join-book.json", CA, lambda: clock[0])
    token, _ = store.create(60.0, "test")
    assert token.secret not in (tmp_path / "join-book.json").read_text()
    assert (tmp_path / "join-book.json").stat().st_mode & 0o077 == 0
    assert store.valid(str(token))
    first = store.admit(token, ["syd-a-1", "syd-a-2"], "10.9.128.0/17", ["10.9.128.0/24"])
    assert first == {"syd-a-1": "10.9.129.0/24", "syd-a-2": "10.9.130.0/24"}
    assert store.admit(token, ["syd-a-1"], "10.9.128.0/17", []) == {"syd-a-1": "10.9.129.0/24"}
    assert store.read().tokens[token.id].joins == 2
    clock[0] = NOW + datetime.timedelta(seconds=61)
    assert not store.valid(str(token))
    with pytest.raises(JoinRefused, match="expired"):
        store.admit(token, ["syd-b-1"], "10.9.128.0/17", [])
    clock[0] = NOW
    assert store.revoke(token.id) is not None
    with pytest.raises(JoinRefused, match="revoked"):
        store.admit(token, ["syd-b-1"], "10.9.128.0/17", [])
    assert store.revoke("00000000") is None
