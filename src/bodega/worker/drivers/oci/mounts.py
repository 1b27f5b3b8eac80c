"""Overlay mounts by system call: a ``mount`` command costs a fork and exec per start."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

from bodega.worker.drivers.base import DriverError

MNT_DETACH = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mounted(path: Path) -> bool:
    return os.path.ismount(path)


def mount_overlay(lower: Path, upper: Path, work: Path, target: Path) -> None:
    """Mount ``lower`` (read-only, shared) under ``upper`` (the machine's own) at ``target``."""
    options = f"lowerdir={lower},upperdir={upper},workdir={work}".encode()
    if _libc.mount(b"overlay", str(target).encode(), b"overlay", 0, options) != 0:
        errno = ctypes.get_errno()
        raise DriverError(f"mount overlay at {target}: {os.strerror(errno)}")


def unmount(target: Path) -> None:
    """Detach ``target`` (lazily: whatever still holds it keeps its view until it lets go)."""
    if _libc.umount2(str(target).encode(), MNT_DETACH) != 0:
        errno = ctypes.get_errno()
        if mounted(target):
            raise DriverError(f"unmount {target}: {os.strerror(errno)}")
