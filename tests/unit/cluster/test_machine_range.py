"""Two clusters on one host never share a machine /24: the second is refused in one line."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from bodega.cluster.machine_range import (
    MachineRangeTaken,
    claim,
    held_subnets,
    lock_path,
    remove_stale,
    same_size_ranges,
    stale,
)

FIRST = ["10.209.1.0/24", "10.209.2.0/24"]


def test_a_held_range_is_refused_naming_the_flag_the_holder_and_a_free_range(
        tmp_path: Path) -> None:
    held = claim("10.209.0.0/16", FIRST, Path("/srv/one"), "aone1", lock_dir=tmp_path)
    try:
        with pytest.raises(MachineRangeTaken) as refused:
            claim("10.209.0.0/16", FIRST, Path("/srv/two"), "atwo2", lock_dir=tmp_path)
        message = str(refused.value)
        assert "\n" not in message
        assert message == (
            "machine range 10.209.0.0/16 overlaps 10.209.1.0/24, used by the bodega cluster "
            f"in /srv/one (pid {os.getpid()}); give this cluster another range with "
            "--machine-cidr, e.g. --machine-cidr 10.210.0.0/16")
        # Another range is fine at the same time.
        claim("10.210.0.0/16", ["10.210.1.0/24"], Path("/srv/two"), "atwo2",
              lock_dir=tmp_path).release()
    finally:
        held.release()


def test_an_overlapping_range_of_another_size_is_refused_too(tmp_path: Path) -> None:
    held = claim("10.209.0.0/16", FIRST, Path("/srv/one"), "aone1", lock_dir=tmp_path)
    try:
        with pytest.raises(MachineRangeTaken, match=r"overlaps 10\.209\.2\.0/24"):
            claim("10.209.0.0/22", ["10.209.2.0/24"], Path("/srv/two"), "atwo2", lock_dir=tmp_path)
    finally:
        held.release()


def test_a_released_range_is_free_again_and_a_failed_claim_holds_nothing(
        tmp_path: Path) -> None:
    other = claim("10.209.0.0/16", ["10.209.2.0/24"], Path("/srv/one"), "aone1", lock_dir=tmp_path)
    with pytest.raises(MachineRangeTaken):
        claim("10.209.0.0/16", FIRST, Path("/srv/two"), "atwo2", lock_dir=tmp_path)
    other.release()
    # 10.209.1.0/24, locked before the refusal, was let go with it.
    claim("10.209.0.0/16", FIRST, Path("/srv/two"), "atwo2", lock_dir=tmp_path).release()


def test_suggestions_are_same_size_private_ranges_after_it() -> None:
    assert list(same_size_ranges("10.209.0.0/16"))[:2] == ["10.210.0.0/16", "10.211.0.0/16"]
    assert next(iter(same_size_ranges("10.255.0.0/16"))) == "10.0.0.0/16"
    assert list(same_size_ranges("192.168.0.0/16")) == []


def test_a_released_claim_leaves_no_lock_file(tmp_path: Path) -> None:
    held = claim("10.209.0.0/16", FIRST, Path("/srv/one"), "aone1", lock_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["10.209.1.0-24.lock",
                                                          "10.209.2.0-24.lock"]
    assert held_subnets(tmp_path) == FIRST
    held.release()
    assert list(tmp_path.iterdir()) == []
    assert held_subnets(tmp_path) == []


def test_stale_lock_files_are_found_by_cluster_id_and_only_unheld_ones_removed(
        tmp_path: Path) -> None:
    """What a killed `bodega up` left: its files, no holder. A running cluster's stay."""
    lock_path(tmp_path, "10.209.1.0/24").write_text(
        '{"data_dir": "/srv/one", "pid": 1, "cluster_id": "aone1"}')
    lock_path(tmp_path, "10.208.1.0/24").write_text('{"data_dir": "/srv/old", "pid": 1}')
    running = claim("10.210.0.0/16", ["10.210.1.0/24"], Path("/srv/two"), "atwo2",
                    lock_dir=tmp_path)
    try:
        assert stale("aone1", tmp_path) == [lock_path(tmp_path, "10.209.1.0/24")]
        assert stale(None, tmp_path) == [lock_path(tmp_path, "10.208.1.0/24")]  # older versions
        assert stale("atwo2", tmp_path) == []  # held
        assert remove_stale([lock_path(tmp_path, "10.209.1.0/24"),
                             lock_path(tmp_path, "10.210.1.0/24")]) == [
            lock_path(tmp_path, "10.209.1.0/24")]
        assert lock_path(tmp_path, "10.210.1.0/24").exists()
    finally:
        running.release()


def test_a_claim_racing_a_removal_locks_the_file_that_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The holder removes its lock file after a claimer opened it and before it locked it:
    the claimer starts over on a new file, so it never holds a lock on a removed one (which
    a third cluster could then claim too)."""
    first = claim("10.209.0.0/16", ["10.209.1.0/24"], Path("/srv/one"), "aone1",
                  lock_dir=tmp_path)
    real = fcntl.flock

    def flock_after_removal(fd: int, operation: int) -> None:
        if first.held:
            first.release()  # unlinks the file the claimer has open, and lets go of it
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_removal)
    second = claim("10.209.0.0/16", ["10.209.1.0/24"], Path("/srv/two"), "atwo2",
                   lock_dir=tmp_path)
    monkeypatch.undo()
    try:
        path, fd = second.held[0]
        assert path.exists()
        assert path.stat().st_ino == os.fstat(fd).st_ino
        with pytest.raises(MachineRangeTaken):
            claim("10.209.0.0/16", ["10.209.1.0/24"], Path("/srv/three"), "athr3",
                  lock_dir=tmp_path)
    finally:
        second.release()
