"""The keyring file: made once, private, rewritten whole; a daemon given it exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.registry.sealing import keyfile
from bodega.registry.sealing.core.keyring import GossipKey, KeyringError
from bodega.registry.sealing.keyfile import KeyringSource, load, needed
from tests.keyring_kit import KEYRING


def test_ensure_makes_a_private_keyring_once(tmp_path: Path) -> None:
    path = tmp_path / "data" / "gossip-keyring"
    made = keyfile.ensure(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(made.keys) == 1
    assert made.serial == 0
    assert keyfile.ensure(path) == made  # the second time: the same cluster's
    assert keyfile.ensure(tmp_path / "other") != made  # another cluster: another key


def test_a_write_replaces_the_file_whole_and_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "gossip-keyring"
    keyfile.write(path, KEYRING)
    rotated = KEYRING.install(GossipKey(b"\7" * 32))
    keyfile.write(path, rotated)
    assert keyfile.read(path) == rotated
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gossip-keyring"]
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(("content", "why"), [
    (None, "no gossip keyring at"),
    ("", "not a gossip keyring"),
    ('{"primary": "x", "keys": []}', "at least one key"),
])
def test_a_bad_file_is_a_clear_error_naming_it(tmp_path: Path, content: str | None,
                                               why: str) -> None:
    path = tmp_path / "gossip-keyring"
    if content is not None:
        path.write_text(content)
    with pytest.raises(KeyringError, match=why) as err:
        keyfile.read(path)
    assert str(path) in str(err.value)


def test_a_daemon_takes_a_file_or_json_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "gossip-keyring"
    keyfile.write(path, KEYRING)
    assert load(path, None) == KeyringSource(KEYRING, path.resolve())
    assert load(None, KEYRING.to_json()) == KeyringSource(KEYRING, None)
    with pytest.raises(KeyringError, match="not both"):
        load(path, KEYRING.to_json())
    with pytest.raises(KeyringError, match="--gossip-keyring FILE"):
        load(None, None)
    with pytest.raises(KeyringError, match="BODEGA_GOSSIP_KEYRING: not a gossip keyring"):
        load(None, "{}")
    with pytest.raises(ValueError, match="a gossip keyring is required"):
        needed(None)
