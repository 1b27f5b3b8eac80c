"""A vm machine's disks: the image's root as an ext4 file (one per image, shared and never
written), a copy-on-write qcow2 over it for each machine (what the machine writes, kept
across its restarts as a container's upper layer is), its config and status disks, and
its swap disk where it asks one (``init.swap_size_mb``: swap is disk, not the host's RAM;
the guest's memory is all the machine's cgroup and placement count).

The ext4 file is made by ``mkfs.ext4 -d`` from the image's unpacked root, in the image's
own directory of the store, so evicting the image removes it. It is sparse: its size
leaves the machine room to write (``FREE_MB``) and costs only what is written.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from bodega.runtime.commands import run_command
from bodega.worker.drivers.base import DriverError

FREE_MB = 1024  # room for a machine's writes beyond the image's files
ROOT_DISK = "root.ext4"
SWAP_DISK = "swap.img"  # in the machine's vm directory


def content_mb(root: Path) -> int:
    """About what the tree under ``root`` takes: file sizes, and a block per entry."""
    total = 0
    for directory, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            try:
                total += os.lstat(os.path.join(directory, name)).st_size + 4096
            except OSError:
                continue
    return total // (1 << 20) + 1


class RootDisks:
    """The base disks of images, each made once (two machines of one image wait on one)."""

    def __init__(self) -> None:
        self._locks: dict[Path, asyncio.Lock] = {}

    async def base(self, rootfs: Path) -> Path:
        """The ext4 of the image unpacked at ``rootfs``, made beside it if not yet there."""
        disk = rootfs.parent / ROOT_DISK
        if disk.exists():
            return disk
        async with self._locks.setdefault(disk, asyncio.Lock()):
            if disk.exists():
                return disk
            size_mb = await asyncio.to_thread(content_mb, rootfs) * 3 // 2 + FREE_MB
            tmp = disk.with_suffix(".making")
            tmp.unlink(missing_ok=True)
            done = await run_command("mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0",
                                     "-d", str(rootfs), str(tmp), f"{size_mb}M")
            if done.returncode != 0:
                tmp.unlink(missing_ok=True)
                raise DriverError(f"mkfs.ext4 of the image's root: "
                                  f"{done.stderr.decode(errors='replace').strip()}")
            tmp.rename(disk)
        return disk


def swap_disk(disk: Path, size_mb: int) -> Path | None:
    """The machine's swap disk of ``size_mb``, made afresh and sparse (what an earlier boot
    swapped out goes with it; the init runs ``mkswap`` on it at each boot); None, and no
    file, for no swap. A resume boots from no ``program``: its disk is kept as it was, with
    what the suspended guest had swapped out."""
    disk.unlink(missing_ok=True)
    if size_mb <= 0:
        return None
    with disk.open("xb") as made:
        made.truncate(size_mb << 20)
    return disk


async def machine_disk(base: Path, disk: Path) -> None:
    """The machine's copy-on-write disk over ``base``, made afresh if it is over another
    (an update changed its image), else kept with what the machine wrote."""
    if not _clear_stale(disk, base):
        return
    done = await run_command("qemu-img", "create", "-q", "-f", "qcow2", "-b", str(base),
                             "-F", "raw", str(disk))
    if done.returncode != 0:
        raise DriverError(f"qemu-img create: {done.stderr.decode(errors='replace').strip()}")
    disk.with_suffix(".base").write_text(str(base))


def _clear_stale(disk: Path, base: Path) -> bool:
    """Remove ``disk`` unless it is over ``base``; True if there is none now."""
    marker = disk.with_suffix(".base")
    if disk.exists() and marker.exists() and marker.read_text() == str(base):
        return False
    disk.unlink(missing_ok=True)
    return True
