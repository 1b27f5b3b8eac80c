"""The keys `bodega up` keeps: made once, kept, and carried over from a data dir's old secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.cluster.cluster_keys import ensure_ca, ensure_keys
from bodega.runtime.secretbox import SecretBox
from bodega.runtime.tls.files import TlsDir
from bodega.runtime.tls.identity import identity_of


def test_a_new_data_dir_gets_a_private_secrets_key_kept_across_starts(tmp_path: Path) -> None:
    first = ensure_keys(tmp_path)
    assert len(first.secrets_key) >= 40
    assert (tmp_path / "secrets-key").stat().st_mode & 0o077 == 0
    assert ensure_keys(tmp_path) == first
    assert not (tmp_path / "cluster-secret").exists()


def test_an_old_cluster_secret_seeds_the_secrets_key_and_secrets_sealed_under_it_still_open(
        tmp_path: Path) -> None:
    old = "the-secret-an-older-bodega-made"
    (tmp_path / "cluster-secret").write_text(old + "\n")
    sealed = SecretBox(old).seal("web", "DATABASE_URL", "postgres://db")  # a row it wrote
    keys = ensure_keys(tmp_path)
    assert SecretBox(keys.secrets_key).open("web", "DATABASE_URL", sealed) == "postgres://db"
    assert not (tmp_path / "gossip-secret").exists()  # gossip has a keyring of its own
    assert not (tmp_path / "cluster-secret").exists()  # no shared secret lingers
    assert ensure_keys(tmp_path) == keys


def test_the_ca_is_made_once_with_an_operator_certificate_beside_it(tmp_path: Path) -> None:
    authority = ensure_ca(tmp_path, "c1abc", 3600.0)
    assert authority.cluster == "c1abc"
    assert (tmp_path / "tls" / "ca-key.pem").stat().st_mode & 0o077 == 0
    _, operator = TlsDir(tmp_path / "tls" / "admin").read_identity()
    assert identity_of(operator).role == "admin"
    assert ensure_ca(tmp_path, "c1abc", 3600.0).cert == authority.cert
    with pytest.raises(ValueError, match="cluster c1abc's, not zz999's"):
        ensure_ca(tmp_path, "zz999", 3600.0)


def test_the_join_token_is_kept_while_valid_and_made_again_once_revoked(
        tmp_path: Path) -> None:
    from bodega.cluster.cluster_keys import ensure_join_token
    from bodega.runtime.tls.authority import utc_now
    from bodega.runtime.tls.join_store import BOOK, JoinStore
    from bodega.runtime.tls.join_token import JoinToken

    authority = ensure_ca(tmp_path, "c1abc", 3600.0)
    first = ensure_join_token(tmp_path, authority)
    assert (tmp_path / "join-token").read_text().strip() == first
    assert (tmp_path / "join-token").stat().st_mode & 0o077 == 0
    assert ensure_join_token(tmp_path, authority) == first  # a restart keeps it
    store = JoinStore(tmp_path / "tls" / BOOK, authority.cert, utc_now)
    store.revoke(JoinToken.parse(first).id)
    second = ensure_join_token(tmp_path, authority)
    assert second != first
    assert store.valid(second)
    assert not store.valid(first)
