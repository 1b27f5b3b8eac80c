"""A vm machine's disks that need no image: its swap disk."""

from __future__ import annotations

from pathlib import Path

from bodega.worker.drivers.vm.disks import swap_disk


def test_a_swap_disk_is_sparse_of_its_size_and_made_afresh_at_each_start(
        tmp_path: Path) -> None:
    disk = tmp_path / "swap.img"
    assert swap_disk(disk, 64) == disk
    assert disk.stat().st_size == 64 << 20
    assert disk.stat().st_blocks * 512 < 1 << 20  # sparse: the host's disk pays what is used
    with disk.open("r+b") as used:  # what a boot swapped out
        used.write(b"\xff" * 4096)
    assert swap_disk(disk, 32) == disk
    assert disk.stat().st_size == 32 << 20
    assert disk.read_bytes()[:4096] == b"\0" * 4096
    # No swap asked: no disk, and none left from a start that asked one.
    assert swap_disk(disk, 0) is None
    assert not disk.exists()
