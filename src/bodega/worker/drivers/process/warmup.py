"""Readying the kernel for a process about to join a cgroup, while the worker does the rest.

Moving a process into a cgroup (a write to ``cgroup.procs``, as the wrapper and
runc and crun do on every start) takes the kernel's threadgroup lock for writing.
When no such move happened in the last few milliseconds that lock first waits for
an RCU grace period: 7-13 ms here, with the host idle, for a move that is
otherwise done in microseconds. Moves close together share one wait: after one, the
lock stays ready for about another grace period. A start pays that wait right in its
path, after all of the worker's own steps.

So a worker that knows a start is coming (a create or a start has just arrived)
makes a move of its own at once, in a thread: its warm-up thread moves itself into
the cgroup it is already in (no process changes cgroup), which pays the grace period
while the worker commits, mounts and writes ``config.json``, and repeats every few
milliseconds for a short while, so the lock is still ready when the machine's
process joins its cgroups. ``crun run`` of a busybox bundle here: 21 ms after an idle
moment, 6-9 ms with a warm-up begun up to 12 ms before it.

While its move waits, the warm-up holds the kernel's cgroup mutex, which making a
cgroup takes too: ``moving`` says so, for the driver to make cgroups in a thread then.
The oci driver uses it; the process driver does not (its starts mostly take a launcher
already waiting in its cgroups, and its own cgroup work would only wait on the warm-up).
A host whose cgroup root is mounted with ``favordynmods`` has no such wait; a warm-up
there costs one fast write per round.

What to write and where is pure (``own_cgroup_file``); ``Warmup`` is the thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from bodega.worker.drivers.process.cgroups import Cgroups

log = logging.getLogger("bodega.worker.cgroups")

# How long a warm-up keeps the lock ready after the last call, and how often it moves.
HOLD_SECONDS = 0.05
EVERY_SECONDS = 0.003


def own_cgroup_file(root: Path, proc_cgroup: str) -> Path | None:
    """The file a thread writes its id to, to move itself into the cgroup it is in.

    ``proc_cgroup``: ``/proc/thread-self/cgroup``. The ``tasks`` file of its cgroup in
    the v1 ``memory`` hierarchy under ``root`` (one thread moves: the rest of the
    worker is not touched); None when the text names no memory cgroup.
    """
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return root / "memory" / path.lstrip("/") / "tasks"
    return None


class Warmup:
    """A thread that keeps the kernel's cgroup move lock ready while starts are coming.

    ``warm`` never blocks the caller; the thread starts on the first call and sleeps
    between bursts. A write the kernel refuses turns the warm-up off, logged once:
    starts then pay the wait as before, and nothing else changes.
    """

    def __init__(self, root: Path, hold: float = HOLD_SECONDS,
                 every: float = EVERY_SECONDS) -> None:
        self.root = root
        self.hold = hold
        self.every = every
        self.moves = 0  # the moves made so far (tests, metrics)
        self.moving = False  # a move is under way: it may hold the kernel's cgroup lock
        self.off = False
        self._until = 0.0
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, cgroups: Cgroups | None) -> Warmup | None:
        """The warm-up for a driver's machines' cgroups: v1 only (a v2 runtime can start its
        container right in its cgroup, with no move); None where they have none."""
        return cls(cgroups.root) if cgroups and cgroups.version == 1 else None

    def warm(self) -> None:
        """A process joins a cgroup soon: keep the lock ready for the next ``hold`` seconds."""
        if self.off:
            return
        with self._lock:
            self._until = time.monotonic() + self.hold
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="cgroup-warmup",
                                                daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        path = own_cgroup_file(self.root, Path("/proc/thread-self/cgroup").read_text())
        if path is None:
            self._turn_off("this thread's cgroup was not found")
            return
        me = str(threading.get_native_id()).encode()
        while True:
            self._wake.wait()
            self._wake.clear()
            while time.monotonic() < self._until:
                self.moving = True
                try:
                    fd = os.open(path, os.O_WRONLY)
                    try:
                        os.write(fd, me)
                    finally:
                        os.close(fd)
                except OSError as exc:
                    self._turn_off(f"{path}: {exc.strerror}")
                    return
                finally:
                    self.moving = False
                self.moves += 1
                time.sleep(self.every)

    def _turn_off(self, why: str) -> None:
        self.off = True
        log.info("cgroup warm-up off (%s): starts wait for the kernel's cgroup lock", why)
