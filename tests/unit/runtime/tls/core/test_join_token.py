"""Join tokens: the CA pin, expiry, revocation, server tokens, and the subnets joined workers
get."""

from __future__ import annotations

import datetime

import pytest

from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import new_key
from bodega.runtime.tls.core.join_token import (
    JoinRefused,
    JoinToken,
    TokenRecord,
    admit,
    assign_subnets,
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


def test_only_a_server_token_lets_a_host_in_as_a_server_and_says_how_to_make_one() -> None:
    token = JoinToken.new(CA)
    plain = {token.id: TokenRecord.of(token, NOW, 3600.0)}
    assert admit(plain, token, ca_hash(CA), NOW) == plain[token.id]
    with pytest.raises(JoinRefused, match=f"join token {token.id} is not a server token: .*"
                                          "bodega cluster token create --server"):
        admit(plain, token, ca_hash(CA), NOW, server=True)
    server = {token.id: TokenRecord.of(token, NOW, 3600.0, "a server", server=True)}
    assert admit(server, token, ca_hash(CA), NOW, server=True).server
    assert admit(server, token, ca_hash(CA), NOW).server  # it lets a plain host in too
    revoked = {token.id: server[token.id].model_copy(update={"revoked": NOW})}
    with pytest.raises(JoinRefused, match="revoked"):  # revoked first: no hint to a thief
        admit(revoked, token, ca_hash(CA), NOW, server=True)


def test_a_worker_keeps_the_subnet_it_was_given_and_a_new_one_gets_one_no_one_holds() -> None:
    held = {"syd-a-1": "10.9.129.0/24"}
    assert assign_subnets(["syd-a-1", "syd-a-2"], "10.9.128.0/17", held,
                          ["10.9.128.0/24"]) == {"syd-a-1": "10.9.129.0/24",
                                                 "syd-a-2": "10.9.130.0/24"}
    assert assign_subnets(["syd-a-1"], "10.9.128.0/17", held, []) == held
    # Without a range a new worker picks its own; a held subnet is still its.
    assert assign_subnets(["syd-a-1", "syd-b-1"], None, held, []) == held
    assert assign_subnets(["syd-b-1", "syd-b-1"], "10.9.128.0/23", {}, []) == {
        "syd-b-1": "10.9.128.0/24"}
    with pytest.raises(ValueError, match="0 free /24s left, 1 asked for"):
        assign_subnets(["syd-c-1"], "10.9.128.0/23", held, ["10.9.128.0/24"])
