"""Apply image layers to a directory: tar entries, whiteouts, no escape from the root.

A layer is a tar (usually gzipped). ``.wh.NAME`` deletes NAME from the
layers below; ``.wh..wh..opq`` empties its directory. Layers come from a
registry, so nothing in one may write outside the root: names with ``..``,
links that resolve outside, and parents that are symlinks are refused, and
device nodes are skipped (a container gets its devices from the runtime).
"""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path, PurePosixPath

from bodega.worker.images.core.manifest import BadImage

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


def _clean(name: str) -> PurePosixPath | None:
    parts = [p for p in PurePosixPath(name).parts if p not in ("/", ".", "")]
    if any(p == ".." for p in parts):
        raise BadImage(f"layer entry {name!r} climbs out of the root")
    return PurePosixPath(*parts) if parts else None


def _check_parents(root: Path, rel: PurePosixPath) -> None:
    """Refuse an entry under a symlink: writing through it could land outside the root."""
    path = root
    for part in rel.parts[:-1]:
        path = path / part
        if path.is_symlink():
            raise BadImage(f"layer entry {rel} lies under the symlink {part}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def apply_layer(layer: Path, root: Path) -> None:
    with tarfile.open(layer, "r:*") as tar:
        for member in tar:
            rel = _clean(member.name)
            if rel is None:
                continue
            _check_parents(root, rel)
            target = root / rel
            if rel.name == OPAQUE:
                if target.parent.is_dir():
                    for child in target.parent.iterdir():
                        _remove(child)
                continue
            if rel.name.startswith(WHITEOUT):
                _remove(target.parent / rel.name[len(WHITEOUT):])
                continue
            if member.isdev():
                continue
            if member.islnk():
                link = _clean(member.linkname)
                if link is None:
                    raise BadImage(f"layer entry {rel}: empty hard link")
                _check_parents(root, link)
                member = member.replace(linkname=str(link), deep=False)
            if target.is_symlink() or (target.exists() and not (member.isdir()
                                                                and target.is_dir())):
                _remove(target)
            member = member.replace(name=str(rel), deep=False)
            tar.extract(member, root, set_attrs=True, numeric_owner=True,
                        filter="fully_trusted")
            if member.isdir():
                os.chmod(target, member.mode)
