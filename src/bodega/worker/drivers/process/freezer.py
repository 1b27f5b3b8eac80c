"""Suspend for the process driver: the cgroup freezer on the machine's cgroup.

A suspend stops every process of the machine where it stands and keeps its
memory; a resume thaws them, so the same processes go on (connections, heap
and all). On a v1 host the machine's processes join its ``freezer`` cgroup
only now, not at start (each cgroup move costs a start an RCU grace period):
every process of its memory cgroup is moved in, the cgroup is frozen, and any
process forked meanwhile is moved in after it (a process joining a frozen
cgroup freezes). On v2 the machine's one cgroup has ``cgroup.freeze``.

A machine is recorded started once its wrapper is spawned, and the wrapper joins the
machine's cgroups as its first act: a suspend sent at once may find them still empty.
It waits for that join (``JOIN_TIMEOUT``), as it waits for the freeze, rather than
refuse a machine that is started.

Both halves are idempotent: the worker may die between freezing and recording
it, and repeats the step when it comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from pathlib import Path

from bodega.worker.drivers.base import DriverError, TaskHandle
from bodega.worker.drivers.process.cgroups import Cgroups

# A process in an uninterruptible sleep (a page of its program read from a disk other
# machines keep busy: VM images made, snapshots written) delays its freeze; not forever.
FREEZE_TIMEOUT = 30.0
JOIN_TIMEOUT = 30.0  # a wrapper just spawned on a loaded host joins its cgroups within this
POLL = 0.002
REFREEZE_EVERY = 25  # looks at a v1 freeze still FREEZING before a thaw and a new ask (50 ms)


class CgroupFreezer:
    def __init__(self, cgroups: Cgroups) -> None:
        self.cgroups = cgroups

    @staticmethod
    def available(cgroups: Cgroups) -> bool:
        return cgroups.freezer_dir("probe") is not None

    async def suspend(self, handle: TaskHandle) -> None:
        machine_id = handle.machine_id
        path = self.cgroups.freezer_dir(machine_id)
        if path is None:
            raise DriverError("this host's cgroups have no freezer")
        try:
            await self._until(lambda: bool(self.cgroups.pids(machine_id)), machine_id,
                              JOIN_TIMEOUT, "has no process to suspend")
            if self.cgroups.version == 2:
                (path / "cgroup.freeze").write_text("1\n")
                await self._until(lambda: _v2_frozen(path), machine_id)
                return
            path.mkdir(parents=True, exist_ok=True)
            self._join(path, machine_id)
            looks = itertools.count(1)
            await self._until(lambda: self._v1_freeze(path, machine_id, next(looks)), machine_id)
        except OSError as exc:
            raise DriverError(f"could not freeze machine {machine_id}: {exc}") from exc

    async def resume(self, handle: TaskHandle) -> TaskHandle:
        try:
            self.cgroups.thaw(handle.machine_id)
        except OSError as exc:
            raise DriverError(f"could not thaw machine {handle.machine_id}: {exc}") from exc
        return handle

    def freezing(self, machine_id: str) -> bool:
        """Frozen, or on the way (asked to freeze): what a thaw has to undo."""
        path = self.cgroups.freezer_dir(machine_id)
        if path is None:
            return False
        if self.cgroups.version == 2:
            try:
                return (path / "cgroup.freeze").read_text().strip() == "1"
            except FileNotFoundError:
                return False
        return _v1_state(path) != "THAWED"

    def _v1_freeze(self, path: Path, machine_id: str, look: int) -> bool:
        """One look at a v1 freeze: asks it (again), True once frozen with every process in.

        A v1 freezer can stay FREEZING for good when it catches a process mid-fork or
        mid-exec (a start's steps exec one another); a brief thaw and a new ask gets it
        past, as runc's freezer does. A process forked before the freeze took, and so
        born outside, is moved in (a process joining a frozen cgroup freezes)."""
        state = _v1_state(path)
        if state == "FROZEN":
            return not self._join(path, machine_id)
        if state == "FREEZING" and look % REFREEZE_EVERY == 0:
            (path / "freezer.state").write_text("THAWED\n")
            self._join(path, machine_id)
        (path / "freezer.state").write_text("FROZEN\n")
        return False

    def _join(self, path: Path, machine_id: str) -> bool:
        """Move every process of the machine into its freezer cgroup; True if any moved.

        Repeated until a pass moves nothing, so a process forked by one not yet moved
        (and so born outside) is moved by the next pass.
        """
        moved_any = False
        for _ in range(100):
            inside = _pids(path / "cgroup.procs")
            missing = [pid for pid in self.cgroups.pids(machine_id) if pid not in inside]
            if not missing:
                return moved_any
            for pid in missing:
                with contextlib.suppress(ProcessLookupError):  # exited since it was listed
                    (path / "cgroup.procs").write_text(f"{pid}\n")
            moved_any = True
        raise DriverError(f"machine {machine_id} forks faster than it can be frozen")

    async def _until(self, done: Callable[[], bool], machine_id: str,
                     timeout: float = FREEZE_TIMEOUT, what: str = "did not freeze") -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not done():
            if loop.time() > deadline:
                raise DriverError(f"machine {machine_id} {what} within {timeout:.0f}s")
            await asyncio.sleep(POLL)


def _v1_state(path: Path) -> str:
    try:
        return (path / "freezer.state").read_text().strip()
    except FileNotFoundError:
        return "THAWED"


def _v2_frozen(path: Path) -> bool:
    try:
        return "frozen 1" in (path / "cgroup.events").read_text().splitlines()
    except FileNotFoundError:
        return False


def _pids(procs: Path) -> set[int]:
    try:
        return {int(line) for line in procs.read_text().split()}
    except FileNotFoundError:
        return set()
