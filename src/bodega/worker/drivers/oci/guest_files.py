"""A start's files (``config.files``) written into a container's or sandbox's root.

The root is the machine's overlay (``driver.py``), mounted before each start: a file
written through it lands in the machine's own upper layer, never in the image's shared
base, and it is written again at every start, over whatever the program made of it.
A path is resolved inside the root as the program would see it: a symlink the image (or
an earlier run) left on the way is followed within the root, never out to the host's,
as runc resolves a mount's destination. Missing directories are made (0755, as
``mkdir -p``); the file is the worker's (root's) with the mode asked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from bodega.worker.core.guest_files import GuestFile
from bodega.worker.drivers.base import DriverError

MAX_LINKS = 40  # symlinks followed for one path, as the kernel's own limit


def in_root(root: Path, guest_path: str) -> Path:
    """Where ``guest_path`` is on the host, seen from inside ``root``: each symlink on the
    way followed within it (an absolute one from ``root``, ``..`` never above it)."""
    parts = [p for p in guest_path.split("/") if p]
    below: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if below:
                below.pop()
            continue
        here = root.joinpath(*below, part)
        if here.is_symlink():
            links += 1
            if links > MAX_LINKS:
                raise DriverError(f"file {guest_path}: too many symbolic links on its way")
            target = os.readlink(here)
            if target.startswith("/"):
                below = []
            parts = [p for p in target.split("/") if p] + parts
            continue
        below.append(part)
    if not below:
        raise DriverError(f"file {guest_path}: resolves to the root itself")
    return root.joinpath(*below)


def write_files(root: Path, files: Iterable[GuestFile]) -> None:
    """Write each file into ``root`` (``DriverError`` naming the file when one cannot be)."""
    for file in files:
        path = in_root(root, file.guest_path)
        try:
            _make_parents(root, path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            try:
                os.fchmod(fd, file.mode)
                view = memoryview(file.data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as exc:
            raise DriverError(f"file {file.guest_path}: cannot write it into the machine: "
                              f"{exc.strerror or exc}") from None


def _make_parents(root: Path, path: Path) -> None:
    """Each missing directory between ``root`` and ``path`` (resolved: none is a link)."""
    missing = []
    parent = path.parent
    while parent != root and not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o755)
        os.chmod(directory, 0o755)  # the worker's umask aside
