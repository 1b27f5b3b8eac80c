"""Copying a volume's directory tree, and the digest of what was copied.

A copy keeps symlinks as links, modes and ownership; the digest is a sha256
over each entry's relative path, mode and (for a file) contents, in sorted
order, so two copies of the same data have the same digest.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

CHUNK = 1 << 20


def copy_tree(source: Path, target: Path) -> tuple[int, str]:
    """Copy ``source`` to ``target`` (which must not exist); its bytes of data and digest."""
    shutil.copytree(source, target, symlinks=True, copy_function=shutil.copy2)
    _copy_owner(source, target)
    return tree_digest(target)


def _copy_owner(source: Path, target: Path) -> None:
    for src in [source, *sorted(source.rglob("*"))]:
        stat = src.lstat()
        os.lchown(target / src.relative_to(source), stat.st_uid, stat.st_gid)


def tree_digest(root: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        digest.update(f"{path.relative_to(root)}\0{stat.st_mode:o}\0".encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            size += stat.st_size
            with path.open("rb") as f:
                while chunk := f.read(CHUNK):
                    digest.update(chunk)
    return size, "sha256:" + digest.hexdigest()


def replace_tree(source: Path, target: Path) -> None:
    """Make ``target`` a copy of ``source``, whatever an earlier try left there."""
    shutil.rmtree(target, ignore_errors=True)
    copy_tree(source, target)
