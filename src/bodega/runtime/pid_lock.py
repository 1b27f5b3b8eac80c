"""A lock file a running process holds (flock) and writes its pid in: "who runs on this dir?"

``bodega up`` holds ``up.lock`` in its data dir and a worker ``worker.lock`` in
its own, for as long as they run. The kernel drops the lock when the process
ends, however it ends, so a lock that can be taken proves its holder is gone,
and ``bodega clean`` asks exactly that before it removes a cluster's leftovers.
Asking reads ``/proc/locks`` and takes no lock.
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
        """Hold ``path`` for this process, or raise ``Held``: "<what> (pid N)".

        A holder may remove the file while it holds it (a refused ``bodega up`` takes
        back its lock file): a file locked just then is no longer at ``path``, so the
        lock is taken again on the file there now."""
        while True:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                pid = _pid_in(path)
                raise Held(f"{what}{f' (pid {pid})' if pid else ''}") from None
            if _names(path, fd):
                break
            os.close(fd)
        said = f"{os.getpid()}\n".encode()
        os.pwrite(fd, said, 0)  # over the last holder's pid, then cut: no fresh page needed
        os.ftruncate(fd, len(said))  # on a full disk
        return cls(path, fd)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _names(path: Path, fd: int) -> bool:
    """``path`` still names the file open as ``fd``."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino)


def try_flock(path: Path, create: bool = True) -> int | None:
    """An fd holding ``path``'s exclusive lock, or None if another process holds it (or,
    with ``create`` false, if there is no such file)."""
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0), 0o644)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        if _names(path, fd):
            return fd
        os.close(fd)  # its holder removed it after we opened it: lock the file there now
        if not create:
            return None


def remove_unheld(paths: list[Path]) -> list[Path]:
    """Remove these lock files, each only while holding it (so nobody else does); returns
    those removed. A claimer that locked one meanwhile finds its path gone and starts over
    (``try_flock``)."""
    removed = []
    for path in paths:
        fd = try_flock(path, create=False)
        if fd is not None:
            path.unlink(missing_ok=True)
            os.close(fd)
            removed.append(path)
    return removed


def holder(path: Path) -> int | None:
    """The pid holding ``path`` now (0 if unknown); None if nobody does."""
    return flock_holder(path)


def flock_holder(path: Path, locks: Path = Path("/proc/locks")) -> int | None:
    """Who holds an flock on ``path``, read from ``/proc/locks``: asking takes no lock, so
    it never makes the holder-to-be of a free file fail its own attempt. 0: a holder whose
    pid the kernel does not say (another pid namespace)."""
    try:
        st = os.stat(path)
        table = locks.read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return _probe(path)
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        fields = line.split()  # "7: FLOCK  ADVISORY  WRITE 24436 fe:00:2148926 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            return max(int(fields[4]), 0)
    return None


def _probe(path: Path) -> int | None:
    """Where ``/proc/locks`` cannot be read: try the lock (briefly held if free)."""
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
