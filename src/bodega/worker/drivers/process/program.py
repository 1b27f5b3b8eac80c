"""Whether a machine's program can be run, said before its start.

The program is exec'd by a process of the machine's user that holds no capabilities
(``launch.py``), so the kernel checks its path as it does for that user: a file in a
directory closed to it (an interpreter under ``/root``, mode 0700) fails there, with
``Permission denied`` in the machine's log and exit 126. The worker's prepare step says
so first, in a line the machine's events and ``bodega deploy`` carry. It checks what the
kernel checks, from mode bits: search on every directory on the way (along the path as
given, and along the one its links lead to) and execute on the file. ACLs are not read:
the exec itself has the last word.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from bodega.worker.drivers.base import DriverError, TaskSpec

SEARCH = EXECUTE = 0o1  # the x bit, of a directory and of a file


def check_program(spec: TaskSpec) -> None:
    """Raise ``DriverError`` saying why ``spec``'s program cannot be run, if it cannot."""
    if not spec.argv:
        raise DriverError("no command to run: set config.init.exec")
    program = spec.argv[0]
    if "/" in program:
        path, top = Path(program), Path("/")
        if not path.is_absolute():  # from where it starts: its own directory
            top = spec.machine_dir / "root"
            path = top / path
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise DriverError(f"exec: {program}: no such executable file")
        if spec.user is not None and not executable_by(path, spec.user, top):
            raise DriverError(closed(program, spec.user))
        return
    search = spec.env.get("PATH")
    if shutil.which(program, path=search) is None:
        raise DriverError(f"exec: {program}: not found in PATH {search or ''}")
    if spec.user is not None:
        # The shell that execs it goes on past a file it may not run to the next in PATH.
        found = [Path(d) / program for d in (search or os.defpath).split(os.pathsep) if d]
        if not any(p.is_file() and executable_by(p, spec.user) for p in found):
            raise DriverError(closed(program, spec.user))


def closed(program: str, user: tuple[int, int]) -> str:
    return (f"exec: {program}: not executable by the machine's user (uid {user[0]}): the "
            "file, or a directory on its way, is closed to that user")


def executable_by(path: Path, user: tuple[int, int], top: Path = Path("/")) -> bool:
    """Whether ``user`` (its uid and gid, no other groups: how a machine runs) may exec
    ``path``: search on each directory from ``top`` down to it, along the path as given and
    along the one its links lead to, and execute on the file."""
    try:
        real = path.resolve(strict=True)
        inside = real.is_relative_to(top.resolve(strict=True))
        directories = {*_down_to(path.parent, top), *_down_to(real.parent,
                                                              top if inside else Path("/"))}
        if not all(permits(os.stat(d), user, SEARCH) for d in directories):
            return False
        found = os.stat(real)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and permits(found, user, EXECUTE)


def permits(found: os.stat_result, user: tuple[int, int], bit: int) -> bool:
    """The kernel's rule for one of ``found``'s permission bits: the owner's, else the
    group's, else the others' (the first class ``user`` is in decides, even to refuse)."""
    uid, gid = user
    shift = 6 if found.st_uid == uid else 3 if found.st_gid == gid else 0
    return bool((found.st_mode >> shift) & bit)


def _down_to(directory: Path, top: Path) -> list[Path]:
    """``directory`` and each one above it up to ``top``, which it is under (else none)."""
    if not directory.is_relative_to(top):
        return []
    return [directory, *(p for p in directory.parents if p.is_relative_to(top))]
