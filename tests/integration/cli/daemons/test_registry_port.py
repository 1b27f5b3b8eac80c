"""The cluster's internal ports (the image registry's, gossip): picked free, claimed host-wide
while its `bodega up` runs, and remembered."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bodega.cluster.port_claims import (
    PortClaims,
    ephemeral_range,
    network_namespace,
    quiet_range,
)
from bodega.cluster.ports import RegistryPort, choose_gossip, choose_registry, remembered
from bodega.runtime.binding import BindError
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


def test_fresh_ports_are_outside_the_ephemeral_range_and_claimed(tmp_path: Path) -> None:
    claims = PortClaims(lock_dir=tmp_path / "locks")
    plan = choose_gossip(tmp_path / "one", "127.0.0.1", NAMES, None, claims)
    registry = choose_registry(tmp_path / "one", "127.0.0.1", None, claims)
    quiet = quiet_range(ephemeral_range())
    assert quiet is not None
    assert all(port in quiet for port in [*plan.ports.values(), registry.port])
    net = f"net{network_namespace()}"  # a claim names its network namespace
    assert {f"udp-{p}-{net}.lock" for p in plan.ports.values()} \
        | {f"tcp-{registry.port}-{net}.lock"} \
        <= {path.name for path in (tmp_path / "locks").iterdir()}
    claims.release()
    assert list((tmp_path / "locks").iterdir()) == []


def test_a_second_cluster_never_takes_a_port_the_first_claimed_but_has_not_bound(
        tmp_path: Path) -> None:
    # The first cluster chose its ports (free now: its components have not bound them yet).
    # A second data dir that remembers the same ports, say a copy, must move off every one.
    first = PortClaims(lock_dir=tmp_path / "locks")
    mine = choose_gossip(tmp_path / "one", "127.0.0.1", NAMES, None, first)
    registry = choose_registry(tmp_path / "one", "127.0.0.1", None, first)
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    second = PortClaims(lock_dir=tmp_path / "locks")
    theirs = choose_gossip(tmp_path / "two", "127.0.0.1", NAMES, None, second)
    assert set(theirs.moved) == set(NAMES)
    assert not set(theirs.ports.values()) & set(mine.ports.values())
    moved = choose_registry(tmp_path / "two", "127.0.0.1", None, second)
    assert moved.moved_from == registry.port
    assert moved.port != registry.port
    with pytest.raises(BindError, match="address already in use"):  # asked for by number
        choose_gossip(tmp_path / "three", "127.0.0.1", NAMES, mine.ports[NAMES[0]],
                      PortClaims(lock_dir=tmp_path / "locks"))
    first.release()
    second.release()
