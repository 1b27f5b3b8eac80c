"""A lock file a running process holds (flock) and writes its pid in: "who runs on this dir?"

``bodega up`` holds ``up.lock`` in its data dir and a worker ``worker.lock`` in
its own, for as long as they run. The kernel drops the lock when the process
ends, however it ends, so a lock that can be taken proves its holder is gone,
and ``bodega clean`` asks exactly that before it removes a cluster's leftovers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path


class Held(ValueError):
    """Another live process holds the lock; the message names it and its pid."""


@dataclass
class PidLock:
    path: Path
    fd: int | None

    @classmethod
    def take(cls, path: Path, what: str) -> PidLock:
        """Hold ``path`` for this process, or raise ``Held``: "<what> (pid N)"."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = _pid_in(path)
            raise Held(f"{what}{f' (pid {pid})' if pid else ''}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def holder(path: Path) -> int | None:
    """The pid holding ``path`` now (0 if it wrote none yet); None if nobody does."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _pid_in(path) or 0
    finally:
        os.close(fd)
    return None


def _pid_in(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().strip())
    return None
