"""The image registry's port: internal to the cluster, so picked free and remembered."""

from __future__ import annotations

from pathlib import Path

from bodega.cluster.ports import RegistryPort, choose_gossip, choose_registry, remembered
from bodega.runtime.serve import bind

NAMES = ["ams-1", "ams-2", "broker", "proxy"]


def test_the_registry_port_is_picked_free_then_kept_and_moved_only_when_taken(
        tmp_path: Path) -> None:
    first = choose_registry(tmp_path, "127.0.0.1", None)
    assert first.moved_from is None
    assert remembered(tmp_path).registry == first.port
    assert choose_registry(tmp_path, "127.0.0.1", None) == RegistryPort(first.port, None)
    with bind("127.0.0.1", first.port):
        moved = choose_registry(tmp_path, "127.0.0.1", None)
    assert moved.moved_from == first.port
    assert moved.port != first.port
    assert remembered(tmp_path).registry == moved.port


def test_an_asked_registry_port_is_used_and_gossip_ports_keep_it(tmp_path: Path) -> None:
    assert choose_registry(tmp_path, "127.0.0.1", 5999) == RegistryPort(5999, None)
    choose_gossip(tmp_path, "127.0.0.1", NAMES, None)
    assert remembered(tmp_path).registry == 5999
    assert set(remembered(tmp_path).gossip) == set(NAMES)
