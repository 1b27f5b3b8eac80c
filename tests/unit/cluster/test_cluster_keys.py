"""The keys `bodega up` keeps: made once, kept, and carried over from a data dir's old secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.cluster.cluster_keys import ensure_ca, ensure_keys
from bodega.runtime.secretbox import SecretBox
from bodega.runtime.tls.core.identity import identity_of
from bodega.runtime.tls.files import TlsDir


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


def test_the_kept_join_token_is_still_valid_only_if_the_book_lists_it_valid_for_this_ca(
        tmp_path: Path) -> None:
    import datetime

    from bodega.cluster.cluster_keys import still_valid
    from bodega.runtime.tls.core.join_token import JoinToken, ca_hash
    from bodega.wire.internal.join import TokenInfo

    authority = ensure_ca(tmp_path, "c1abc", 3600.0)
    token = JoinToken.new(authority.cert)
    now = datetime.datetime(2026, 11, 24, tzinfo=datetime.UTC)

    def listed(status: str, token_id: str = token.id) -> list[TokenInfo]:
        return [TokenInfo(id=token_id, status=status, created=now, expires=now)]

    pinned = ca_hash(authority.cert)
    assert still_valid(str(token), pinned, listed("valid"))
    assert not still_valid(str(token), pinned, listed("revoked"))
    assert not still_valid(str(token), pinned, listed("expired"))
    assert not still_valid(str(token), pinned, listed("valid", "00000000"))
    assert not still_valid(str(token), "0" * 64, listed("valid"))  # another CA's
    assert not still_valid("not a token", pinned, listed("valid"))
