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

While its move waits, the warm-up holds the kernel's cgroup mutex, which making,
renaming or removing a cgroup takes too: ``moving`` says so, and ``clear`` waits it
out in the event loop's turn before the worker's own cgroup work (a start's cgroups made,
a parked launcher's renamed, a launcher parked, a run's removed), rather than in a
system call that would stop the whole worker. Only
image starts warm (a process machine's start mostly takes a launcher already waiting in
its cgroups, and its own cgroup work would only wait on the warm-up).
A host whose cgroup root is mounted with ``favordynmods`` has no such wait; a warm-up
there costs one fast write per round.

What to write and where is pure (``own_cgroup_file``); ``Warmup`` is the thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bodega.worker.drivers.process.cgroups import Cgroups

log = logging.getLogger("bodega.worker.cgroups")

# How long a warm-up keeps the lock ready after the last call, and how often it moves.
HOLD_SECONDS = 0.05
EVERY_SECONDS = 0.003
# The longest ``clear`` waits: a grace period is 7-13 ms here; past this, go on regardless.
CLEAR_LIMIT_SECONDS = 0.1


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
        # From a burst's call until its first move is done: that move may be waiting for a
        # grace period, holding the kernel's cgroup mutex (making a cgroup would wait too).
        self.moving = False
        self.off = False
        self._until = 0.0
        self._burst = False  # the thread is in a burst (not asleep)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._ahead: list[Callable[[], None]] = []  # run by the thread before its next move

    @classmethod
    def of(cls, cgroups: Cgroups | None) -> Warmup | None:
        """The warm-up for a driver's machines' cgroups: v1 only (a v2 runtime can start its
        container right in its cgroup, with no move); None where they have none."""
        return cls(cgroups.root) if cgroups is not None and cgroups.version == 1 else None

    def warm(self, ahead: Callable[[], None] | None = None) -> None:
        """A process joins a cgroup soon: keep the lock ready for the next ``hold`` seconds.

        ``ahead``: cgroup work of the coming start (making its cgroups), run by the thread
        before its next move, when nothing of the warm-up holds the kernel's cgroup mutex:
        the start then has none left to do after the move's wait, and its own move waits
        out what is left of that grace period instead of waiting for all of it first."""
        if self.off:
            return
        with self._lock:
            if ahead is not None:
                self._ahead.append(ahead)
            self._until = time.monotonic() + self.hold
            if self._burst:
                return  # the burst under way runs on until the new end
            self._burst = self.moving = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="cgroup-warmup",
                                                daemon=True)
                self._thread.start()
        self._wake.set()

    async def clear(self, limit: float = CLEAR_LIMIT_SECONDS) -> None:
        """Until no move of the warm-up's holds the kernel's cgroup mutex (at most ``limit``
        seconds): the worker's own cgroup work (making, renaming, removing a cgroup) waits
        here, in the event loop's turn, rather than in a system call that would hold it."""
        deadline = time.monotonic() + limit
        while self.moving and time.monotonic() < deadline:
            await asyncio.sleep(0.001)

    def _run(self) -> None:
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                self._one_burst()
        except (OSError, ValueError) as exc:
            self._turn_off(str(exc))

    def _one_burst(self) -> None:
        # Read again each burst: the worker may have been moved to another cgroup since,
        # and a move into the old one would be a real move.
        path = own_cgroup_file(self.root, Path("/proc/thread-self/cgroup").read_text())
        if path is None:
            raise ValueError("this thread's memory cgroup was not found")
        # The thread's own id, never "0": the kernel skips the lock for a thread that
        # names itself as 0, and the warm-up would then ready nothing.
        me = str(threading.get_native_id()).encode()
        while True:
            self._run_ahead()
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, me)
            finally:
                os.close(fd)
            self.moves += 1
            self.moving = False
            with self._lock:
                if time.monotonic() >= self._until:
                    self._burst = False
                    return
            time.sleep(self.every)

    def _run_ahead(self) -> None:
        with self._lock:
            ahead, self._ahead = self._ahead, []
        for step in ahead:
            try:
                step()
            except OSError as exc:  # the start does it again, after waiting on the warm-up
                log.warning("cgroup work ahead of a start failed: %s", exc)

    def _turn_off(self, why: str) -> None:
        self.off = True
        self.moving = False
        self._run_ahead()  # what was queued still runs (a refused create's removal)
        log.info("cgroup warm-up off (%s): starts wait for the kernel's cgroup lock", why)
