"""A start's files (``config.files``) written into a container's or sandbox's root.

The root is the machine's overlay (``driver.py``), mounted before each start: a file
written through it lands in the machine's own upper layer, never in the image's shared
base, and it is written again at every start, over whatever the program made of it.
A path is resolved inside the root as the program would see it: a symlink the image (or
an earlier run) left on the way is followed within the root, never out to the host's,
as runc resolves a mount's destination. Missing directories are made (0755, as
``mkdir -p``); the file is the worker's (root's) with the mode asked. A file of the
worker's beside the root (``swap_written``) remembers which paths the last start wrote,
so a file whose entry is gone from the config is removed at the next start.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from bodega.worker.core.guest_files import GuestFile, dropped
from bodega.worker.drivers.base import DriverError

MAX_LINKS = 40  # symlinks followed for one path, as the kernel's own limit
FILES_WRITTEN = "files.json"  # beside a machine's root: the paths its last start wrote


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


def remove_files(root: Path, paths: Iterable[str]) -> None:
    """Remove each file at ``paths`` inside ``root`` that is still a file; what is gone,
    or is a directory now, is left."""
    for guest_path in paths:
        with contextlib.suppress(DriverError, OSError):
            path = in_root(root, guest_path)
            if path.is_file() and not path.is_symlink():
                path.unlink()


def swap_written(path: Path, files: Sequence[GuestFile]) -> tuple[str, ...]:
    """Record in ``path`` the guest paths of ``files``, this start's; the paths the last
    start recorded there that it does not write (to remove)."""
    before: list[str] = []
    with contextlib.suppress(OSError, ValueError):
        before = [str(p) for p in json.loads(path.read_text())]
    gone = dropped(before, files)
    if files or before:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps([file.guest_path for file in files]))
        tmp.rename(path)
    return gone


def refresh_files(root: Path, written: Path, files: Sequence[GuestFile]) -> None:
    """This start's files into ``root``, and the last start's it does not write removed
    (``written`` records which they were)."""
    remove_files(root, swap_written(written, files))
    write_files(root, files)
