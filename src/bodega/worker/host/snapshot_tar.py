"""A snapshot's tree as one tar file, for sending it to another worker, and back.

``pack`` writes the tree (links as links, modes, numeric owners) to a file; ``unpack``
extracts one into a fresh directory, refusing members that would land outside it,
and answers the tree's bytes and digest (``volume_copy.tree_digest``) so the
receiver can check it got what the sender had before keeping it.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

from bodega.worker.host.volume_copy import tree_digest


class DigestMismatch(ValueError):
    """What arrived is not the snapshot its sender described."""


def pack(source: Path, target: Path) -> int:
    """Write ``source``'s tree to the tar file ``target``; its size in bytes."""
    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in [source, *sorted(source.rglob("*"))]:
            tar.add(path, arcname=str(path.relative_to(source)), recursive=False)
    return target.stat().st_size


def unpack(archive: Path, target: Path, digest: str) -> tuple[int, str]:
    """Extract ``archive`` into ``target`` (made fresh) and check it has ``digest``;
    its bytes and digest. On a mismatch nothing is left at ``target``."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    try:
        with tarfile.open(archive, "r") as tar:
            tar.extractall(target, numeric_owner=True, filter="tar")
        size, got = tree_digest(target)
        if got != digest:
            raise DigestMismatch(f"the copy's digest is {got}, its sender's {digest}")
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return size, got
