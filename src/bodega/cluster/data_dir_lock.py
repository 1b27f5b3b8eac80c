"""The lock ``bodega up`` and ``bodega join`` hold on their data dir, and what a refused run
takes back.

Everything that can refuse a run (another run on the dir, a taken port, a machine
range another cluster holds, a bad token, a host that does not answer) refuses it
before anything is started. A refused run leaves the data dir as it found it:
what it added there (its lock file, a cluster id, ``ports.json``...) is removed, and
so are the data dir and the parents it made, when it made them. What was there
before stays. Once the run has started something (``started``), all it wrote
stays: the components' logs, a joined host's identity.

The run holds its lock while it takes back, so no other run of the same command
writes there meanwhile; the lock file is removed while still held, and a run that
locked it just then finds the path no longer names its file and locks the new one
(``PidLock.take``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from bodega.runtime.pid_lock import PidLock


@dataclass
class DataDirLock:
    data_dir: Path
    lock: PidLock
    found: frozenset[str]  # the data dir's entries before the run; empty if it made the dir
    made: tuple[Path, ...]  # the directories the run made, the data dir first
    kept: bool = False

    @classmethod
    def take(cls, data_dir: Path, name: str, what: str) -> DataDirLock:
        """Hold ``data_dir/name`` for this run, or raise ``Held`` (``what``: who holds it)
        having changed nothing."""
        made = tuple(p for p in (data_dir, *data_dir.parents) if not p.exists())
        found = frozenset() if made else frozenset(os.listdir(data_dir))
        try:
            lock = PidLock.take(data_dir / name, what)
        except BaseException:
            _remove_empty(made)  # a Held run's data dir is the holder's: it was there already
            raise
        return cls(data_dir, lock, found, made)

    def started(self) -> None:
        """From now on what the run writes stays, however it ends."""
        self.kept = True

    def release(self) -> None:
        """Drop the lock; a run that did not start takes back what it wrote first."""
        if self.lock.fd is None:
            return
        if not self.kept:
            self._take_back()
        self.lock.release()
        if not self.kept:
            _remove_empty(self.made)

    def _take_back(self) -> None:
        lock_name = self.lock.path.name
        for name in sorted(set(os.listdir(self.data_dir)) - self.found - {lock_name}):
            path = self.data_dir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        if lock_name not in self.found:
            self.lock.path.unlink(missing_ok=True)  # still held: see the module's docstring

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.release()


def _remove_empty(made: tuple[Path, ...]) -> None:
    """Remove the directories in ``made`` (innermost first) as long as they are empty."""
    for directory in made:
        try:
            directory.rmdir()
        except OSError:
            return  # not empty: someone else's now, and so are its parents
