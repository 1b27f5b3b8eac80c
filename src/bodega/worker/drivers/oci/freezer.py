"""Suspend for the oci driver: the cgroup freezer, through ``runc pause`` and ``runc resume``.

runc puts the container in a freezer cgroup of its own (``cgroupsPath``), so a
pause stops every process of the run where it stands and keeps its memory; a
resume thaws it. Both are idempotent, as every driver step must be (a worker
killed after the pause repeats it): runc refuses to pause a paused container
or resume a running one, so the container's state is read first, from the
freezer cgroup itself where bodega knows it (a file read, where ``runc
state`` costs a process: about half of a resume's time here).

A sandbox's pause (runsc's) stops the tasks of gVisor's kernel, not the cgroup: its
state is asked of runsc. ``runsc checkpoint`` would write the sandbox to a file, but
this runsc refuses it for a sandbox on the host's network, the only one it runs here.
"""

from __future__ import annotations

from collections.abc import Callable

from bodega.worker.drivers.base import DriverError, TaskHandle
from bodega.worker.drivers.oci.runc import Runc
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.freezer import CgroupFreezer


class RuncFreezer:
    def __init__(self, runtime_of: Callable[[str], Runc], cgroups: Cgroups | None) -> None:
        self.runtime_of = runtime_of  # the runtime of a machine's bundle (runc or runsc)
        self.cgroups = cgroups

    def _id(self, handle: TaskHandle) -> str:
        return Runc.container_id(handle.machine_id, handle.start_seq)

    async def status(self, handle: TaskHandle) -> str:
        """The container's status as runc reports it (running, paused, stopped, ...)."""
        return await self.runtime_of(handle.machine_id).status(self._id(handle))

    async def paused(self, handle: TaskHandle) -> bool:
        cgroups = self.cgroups
        if cgroups is not None and cgroups.freezer_dir(handle.machine_id) is not None \
                and self.runtime_of(handle.machine_id).freezes_cgroup:
            # runc's cgroupsPath is the machine's cgroup: its freezer is this one.
            return CgroupFreezer(cgroups).freezing(handle.machine_id)
        try:
            return await self.status(handle) == "paused"
        except DriverError:
            return False  # no such container any more: nothing is frozen

    async def suspend(self, handle: TaskHandle) -> None:
        if not await self.paused(handle):
            await self.runtime_of(handle.machine_id).run("pause", self._id(handle))

    async def resume(self, handle: TaskHandle) -> TaskHandle:
        if await self.paused(handle):
            await self.runtime_of(handle.machine_id).run("resume", self._id(handle))
        return handle
