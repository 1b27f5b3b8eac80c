"""A node adopts the cluster's later keyring: from its view at start, from a changed row, never
an older one; the host's keyring file follows. (A node that is never started: no sockets.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from bodega.registry import RegistryConfig, RegistryNode
from bodega.registry.gossipkeys import KEY, TABLE
from bodega.registry.sealing import keyfile
from bodega.registry.sealing.core.keyring import GossipKey, Keyring
from tests.keyring_kit import KEYRING

NEW = GossipKey(b"\5" * 32)
ROTATED = KEYRING.install(NEW).use(NEW.id).only_primary()  # serial 3


def row(keyring: Keyring) -> dict[str, object]:
    return {"name": KEY, **keyring.doc().model_dump()}


class Opened:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.nodes: list[RegistryNode] = []

    def node(self, keyring: Keyring = KEYRING, *, file: bool = True) -> RegistryNode:
        path = self.root / "gossip-keyring"
        if file and not path.exists():
            keyfile.write(path, keyring)
        made = RegistryNode(RegistryConfig(
            name="w1", role="worker", region="ams", data_dir=self.root / "registry",
            keyring=keyring, keyring_file=path if file else None),
            registry=CollectorRegistry())
        self.nodes.append(made)
        return made


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[Opened]:
    kit = Opened(tmp_path)
    yield kit
    for node in kit.nodes:
        node.view.close()


def test_a_rotation_row_is_adopted_reported_and_written_to_the_file(opened: Opened) -> None:
    node = opened.node()
    node.put_shared(TABLE, KEY, row(ROTATED))
    assert node.membership.keyring == ROTATED
    assert node.membership.keyring.report() == f"{NEW.id}*"
    assert keyfile.read(opened.root / "gossip-keyring") == ROTATED


def test_at_start_the_later_of_the_file_and_the_view_wins(opened: Opened) -> None:
    first = opened.node()
    first.put_shared(TABLE, KEY, row(ROTATED))
    first.view.close()
    opened.nodes.remove(first)
    (opened.root / "gossip-keyring").unlink()  # the host's file is still the old keyring
    again = opened.node(KEYRING)
    assert again.membership.keyring == ROTATED
    assert keyfile.read(opened.root / "gossip-keyring") == ROTATED


def test_an_older_row_is_not_adopted(opened: Opened) -> None:
    later = ROTATED.install(GossipKey(b"\6" * 32))  # serial 4: what the file says
    node = opened.node(later)
    node.put_shared(TABLE, KEY, row(ROTATED))  # serial 3: a stale write
    assert node.membership.keyring == later
    assert keyfile.read(opened.root / "gossip-keyring") == later


def test_a_bad_row_changes_nothing(opened: Opened) -> None:
    node = opened.node()
    node.put_shared(TABLE, KEY, {"name": KEY, "serial": 9, "primary": "nope", "keys": []})
    assert node.membership.keyring == KEYRING


def test_a_node_given_json_keeps_its_keyring_in_its_view_only(opened: Opened) -> None:
    node = opened.node(file=False)
    node.put_shared(TABLE, KEY, row(ROTATED))
    assert node.membership.keyring == ROTATED
    assert not (opened.root / "gossip-keyring").exists()

