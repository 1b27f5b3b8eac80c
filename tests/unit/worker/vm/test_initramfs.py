"""bodega's initramfs: the modules' load order from their own depends, the cpio archive."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from bodega.worker.drivers.vm.initramfs import (
    OTHER_BUILDS_KEPT,
    WANTED_MODULES,
    Kernel,
    KernelError,
    archive,
    depends,
    init_script,
    initramfs,
    load_order,
)

DEPENDS = {"virtio_ring": [], "virtio": ["virtio_ring"], "virtio_mmio": ["virtio", "virtio_ring"],
           "virtio_blk": ["virtio", "virtio_ring"], "failover": [], "net_failover": ["failover"],
           "virtio_net": ["virtio_ring", "virtio", "net_failover"]}


def test_modules_load_after_what_they_depend_on_and_builtins_are_left_out() -> None:
    order = load_order(["virtio_mmio", "virtio_blk", "virtio_net", "ext4"], DEPENDS.__getitem__,
                       DEPENDS, builtin=["ext4", "crc32c"])
    assert order == ["virtio_ring", "virtio", "virtio_mmio", "virtio_blk", "failover",
                     "net_failover", "virtio_net"]
    for position, name in enumerate(order):
        assert set(DEPENDS[name]) <= set(order[:position])


def test_a_missing_module_or_a_ring_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match="no module ext4"):
        load_order(["ext4"], DEPENDS.__getitem__, DEPENDS, builtin=[])
    ring = {"a": ["b"], "b": ["a"]}
    with pytest.raises(KernelError, match="ring"):
        load_order(["a"], ring.__getitem__, ring, builtin=[])


def test_depends_is_read_from_a_modules_modinfo_strings() -> None:
    module = b"\x7fELF...\0license=GPL\0depends=virtio_ring,virtio,net-failover\0intree=Y\0"
    assert depends(module) == ["virtio_ring", "virtio", "net_failover"]
    assert depends(b"\0license=GPL\0depends=\0name=x\0") == []
    assert depends(b"no modinfo") == []


def test_the_archive_unpacks_with_cpio_to_the_init_busybox_and_modules(tmp_path: Path) -> None:
    data = archive(b"#!/bin/busybox sh\n", b"BUSYBOX", {"virtio_ring": b"R", "virtio": b"V"})
    assert archive(b"#!/bin/busybox sh\n", b"BUSYBOX",
                   {"virtio_ring": b"R", "virtio": b"V"}) == data, "the same bytes each time"
    subprocess.run(["busybox", "cpio", "-i", "-d"], input=data, cwd=tmp_path, check=True,
                   capture_output=True)
    assert (tmp_path / "init").read_bytes() == b"#!/bin/busybox sh\n"
    assert (tmp_path / "init").stat().st_mode & 0o111
    assert (tmp_path / "bin" / "busybox").read_bytes() == b"BUSYBOX"
    assert (tmp_path / "modules").read_text() == "virtio_ring\nvirtio\n"
    assert (tmp_path / "modules.d" / "virtio.ko").read_bytes() == b"V"


def test_the_init_ships_with_bodega_and_parses_as_shell() -> None:
    script = init_script()
    assert script.startswith(b"#!/bin/busybox sh\n")
    subprocess.run(["/bin/sh", "-n"], input=script, check=True)


def swap_step(swap: str, disk: int, mkswap: int, swapon: int) -> str:
    """What the init's swap step does and says, run alone with its commands stubbed (each
    stub's exit status given), then a line saying the init went on."""
    lines = init_script().decode().splitlines()
    start = lines.index("# The machine's swap (init.swap_size_mb): a disk of its own, made "
                        "afresh at each start.")
    step = "\n".join(lines[start:lines.index("fi", start) + 1])
    stubs = (f'say() {{ echo "bodega-init: $*"; }}\n'
             f"disk() {{ echo disk $1 >&2; [ {disk} = 0 ] && echo /dev/vdd; }}\n"
             f"mkswap() {{ echo mkswap $1 >&2; return {mkswap}; }}\n"
             f"swapon() {{ echo swapon $1 >&2; return {swapon}; }}\n")
    return subprocess.run(["/bin/sh", "-c", f"exec 2>&1\nswap={swap}\n{stubs}{step}\n"
                                            "echo went on"],
                          capture_output=True, text=True, check=True).stdout


def test_the_init_swaps_on_its_swap_disk_and_goes_on_saying_so_if_it_cannot() -> None:
    assert swap_step("1", 0, 0, 0) == ("disk bodega-swap\nmkswap /dev/vdd\n"
                                       "swapon /dev/vdd\nwent on\n")
    assert swap_step("''", 0, 0, 0) == "went on\n"  # no swap asked: no disk looked for
    said = "bodega-init: no swap: could not swap on its disk\nwent on\n"
    assert swap_step("1", 1, 0, 0) == "disk bodega-swap\n" + said
    assert swap_step("1", 0, 1, 0) == "disk bodega-swap\nmkswap /dev/vdd\n" + said
    assert swap_step("1", 0, 0, 1) == ("disk bodega-swap\nmkswap /dev/vdd\n"
                                       "swapon /dev/vdd\n" + said)


def test_a_kernel_is_found_with_its_modules_or_said_missing(tmp_path: Path) -> None:
    with pytest.raises(KernelError, match="no kernel"):
        Kernel.find(tmp_path)
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "vmlinuz-6.1.0-9-cloud-amd64").write_bytes(b"k")
    with pytest.raises(KernelError, match="no modules for kernel"):
        Kernel.find(tmp_path)
    (tmp_path / "lib" / "modules" / "6.1.0-9-cloud-amd64").mkdir(parents=True)
    kernel = Kernel.find(tmp_path)
    assert kernel.version == "6.1.0-9-cloud-amd64"
    assert kernel.modules == tmp_path / "lib" / "modules" / "6.1.0-9-cloud-amd64"


def test_a_build_is_cached_and_another_builds_is_left_until_it_is_a_day_old(
        tmp_path: Path) -> None:
    version = "6.1.0-9-cloud-amd64"
    modules = tmp_path / "k" / "lib" / "modules" / version
    modules.mkdir(parents=True)
    (tmp_path / "k" / "boot").mkdir()
    (tmp_path / "k" / "boot" / f"vmlinuz-{version}").write_bytes(b"k")
    for name in WANTED_MODULES:
        (modules / f"{name}.ko").write_bytes(b"\0depends=\0")
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"box")
    cache = tmp_path / "cache"
    cache.mkdir()
    fresh, stale = (cache / f"initramfs-{version}-{n}.cpio" for n in ("fresh", "stale"))
    fresh.write_bytes(b"another bodega's")
    stale.write_bytes(b"an old one")
    os.utime(stale, (time.time() - 2 * OTHER_BUILDS_KEPT,) * 2)
    built = initramfs(Kernel.find(tmp_path / "k"), cache, busybox)
    assert built.exists()
    assert initramfs(Kernel.find(tmp_path / "k"), cache, busybox) == built
    assert fresh.exists(), "a worker of another build may be about to boot from it"
    assert not stale.exists()
