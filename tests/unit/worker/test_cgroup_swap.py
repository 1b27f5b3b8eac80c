"""A machine's swap in its memory cgroup: none unless its config asks (init.swap_size_mb),
then that much beside its memory; a live change of its memory keeps the swap it was given.
On a cgroup tree in a temporary directory: the files the kernel would take."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.memory import CgroupMemory

MIB = 1 << 20


def v1_limits(root: Path, machine_id: str) -> tuple[int, int]:
    """The machine's (memory, memory + swap) limits in MB, as a v1 tree holds them."""
    path = root / "memory" / "bodega" / "w" / machine_id
    return (int((path / "memory.limit_in_bytes").read_text()) // MIB,
            int((path / "memory.memsw.limit_in_bytes").read_text()) // MIB)


@pytest.mark.parametrize(("swap_mb", "memsw_mb"), [(0, 256), (512, 768)])
def test_on_v1_memsw_is_memory_and_the_swap_asked(tmp_path: Path, swap_mb: int,
                                                   memsw_mb: int) -> None:
    cgroups = Cgroups(1, "w", tmp_path)
    cgroups.create("m1", 256, 1, swap_mb)
    assert v1_limits(tmp_path, "m1") == (256, memsw_mb)
    # A parked launcher's cgroups, made bare, get the machine's limits when it takes them.
    cgroups.create("slot", None, None)
    cgroups.adopt("slot", "m2", 512, 1, swap_mb)
    assert v1_limits(tmp_path, "m2") == (512, 512 + swap_mb)


@pytest.mark.parametrize("swap_mb", [0, 512])
def test_on_v2_swap_max_is_the_swap_asked(tmp_path: Path, swap_mb: int) -> None:
    cgroups = Cgroups(2, "w", tmp_path)
    cgroups.create("m1", 256, 1, swap_mb)
    path = tmp_path / "bodega" / "w" / "m1"
    assert int((path / "memory.max").read_text()) == 256 * MIB
    assert int((path / "memory.swap.max").read_text()) == swap_mb * MIB


def test_a_live_memory_change_keeps_the_swap_the_start_gave(tmp_path: Path) -> None:
    cgroups = Cgroups(1, "w", tmp_path)
    cgroups.create("m1", 512, 1, 1024)
    path = tmp_path / "memory" / "bodega" / "w" / "m1"
    (path / "memory.usage_in_bytes").write_text(f"{100 * MIB}\n")
    memory = CgroupMemory(cgroups)
    memory.set_limit("m1", 1024)
    assert v1_limits(tmp_path, "m1") == (1024, 2048)
    memory.set_limit("m1", 256)
    assert v1_limits(tmp_path, "m1") == (256, 1280)
    cgroups.create("m2", 512, 1)
    (tmp_path / "memory" / "bodega" / "w" / "m2" / "memory.usage_in_bytes").write_text("0\n")
    memory.set_limit("m2", 768)
    assert v1_limits(tmp_path, "m2") == (768, 768)  # no swap, still none


def test_swap_is_accounted_where_the_kernel_has_its_files(tmp_path: Path) -> None:
    v1 = Cgroups(1, "w", tmp_path / "v1")
    (tmp_path / "v1" / "memory").mkdir(parents=True)
    assert not v1.accounts_swap()  # swapaccount=0: no memory.memsw.* at all
    (tmp_path / "v1" / "memory" / "memory.memsw.limit_in_bytes").write_text("0\n")
    assert v1.accounts_swap()
    v2 = Cgroups(2, "w", tmp_path / "v2")
    (tmp_path / "v2" / "system.slice").mkdir(parents=True)
    assert not v2.accounts_swap()
    (tmp_path / "v2" / "system.slice" / "memory.swap.max").write_text("max\n")
    assert v2.accounts_swap()
