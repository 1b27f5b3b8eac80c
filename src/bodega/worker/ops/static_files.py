"""A machine's ``statics``: the file of its image a request's path names, for the edge.

The file is read from the image's unpacked base in the worker's store
(``images/bases/<hex>/rootfs``), never from the machine's own root, so it is
there in any state, stopped included, and reading it starts nothing. Which
path a request names is ``model/statics.py``'s; this module finds it in the
base as the machine would: symbolic links are followed as inside a chroot at
the base (an absolute target starts again at the base, ``..`` stops there),
so none leads out of the image. Only a regular file is served; a directory
is served by its ``index_document`` when the static names one.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from bodega.model.errors import NotFound
from bodega.model.statics import Refuse, find
from bodega.worker.core.records import MachineRow
from bodega.worker.drivers.oci.driver import OciDriver
from bodega.worker.images.core.manifest import BadImage
from bodega.worker.images.store import base_rootfs
from bodega.worker.ops.machines import MachineService

MAX_LINKS = 40  # as Linux's path walk: more links than this is a loop


@dataclass(frozen=True)
class StaticFile:
    path: Path  # on the host, every step resolved
    stat: os.stat_result


def in_root(root: Path, path: str) -> Path | None:
    """``path`` (absolute, in the image) resolved as a chroot at ``root`` resolves it: a
    host path with no link left in it, or None when a step is missing or links loop."""
    pending = list(reversed(path.split("/")))
    done: list[str] = []
    links = 0
    while pending:
        step = pending.pop()
        if step in ("", "."):
            continue
        if step == "..":
            if done:
                done.pop()
            continue
        here = root.joinpath(*done, step)
        try:
            mode = os.lstat(here).st_mode
        except OSError:  # missing, or a step through something not a directory
            return None
        if stat.S_ISLNK(mode):
            links += 1
            if links > MAX_LINKS:
                return None
            target = os.readlink(here)
            if target.startswith("/"):
                done = []
            pending.extend(reversed(target.split("/")))
            continue
        done.append(step)
    return root.joinpath(*done)


def regular(root: Path, path: str, index_document: str | None) -> StaticFile | None:
    """The regular file ``path`` names in the image at ``root`` (a directory's
    ``index_document``), or None."""
    found = in_root(root, path)
    if found is None:
        return None
    try:
        st = os.stat(found)
        if stat.S_ISDIR(st.st_mode) and index_document:
            found = in_root(root, f"{path.rstrip('/')}/{index_document}")
            if found is None:
                return None
            st = os.stat(found)
    except OSError:
        return None
    return StaticFile(found, st) if stat.S_ISREG(st.st_mode) else None


class StaticFiles:
    def __init__(self, machines: MachineService, images_dir: Path) -> None:
        self.machines = machines
        self.images_dir = images_dir

    def image_root(self, machine_id: str) -> Path | None:
        """The unpacked base of the image the machine runs (None: it runs none, or the
        worker no longer holds it)."""
        digest = OciDriver.image_of(self.machines.effects.config.machine_dir(machine_id))
        if digest is None:
            return None
        try:
            root = base_rootfs(self.images_dir, digest)
        except BadImage:
            return None
        return root if root.is_dir() else None

    def file(self, row: MachineRow, path: str) -> StaticFile:
        """The file ``path`` (the request's, decoded) names through the machine's statics;
        ``NotFound`` saying why when none."""
        hit = find(row.config.statics or [], path or "/")
        if hit is None:
            raise NotFound(f"not_found: no static of machine {row.id} holds {path!r}")
        if isinstance(hit, Refuse):
            raise NotFound(f"not_found: {path!r} names no file: {hit.reason}")
        root = self.image_root(row.id)
        if root is None:
            raise NotFound(f"not_found: machine {row.id} has no image here to serve "
                           "files from")
        found = regular(root, hit.guest_path, hit.index_document)
        if found is None:
            raise NotFound(f"not_found: no file at {hit.guest_path} in machine {row.id}'s "
                           "image")
        return found
