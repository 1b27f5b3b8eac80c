"""Suspend for the oci driver: the cgroup freezer, through ``runc pause`` and ``runc resume``.

runc puts the container in a freezer cgroup of its own (``cgroupsPath``), so a
pause stops every process of the run where it stands and keeps its memory; a
resume thaws it. The worker's API does not offer suspend yet (no state
machine for it in the worker's core): this is the driver's half.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.worker.drivers.base import TaskHandle

if TYPE_CHECKING:
    from bodega.worker.drivers.oci.driver import OciDriver


class RuncFreezer:
    def __init__(self, driver: OciDriver) -> None:
        self.driver = driver

    async def suspend(self, handle: TaskHandle) -> None:
        await self.driver.run_checked(self.driver.runc(
            "pause", self.driver.container_id(handle.machine_id, handle.start_seq)))

    async def resume(self, handle: TaskHandle) -> None:
        await self.driver.run_checked(self.driver.runc(
            "resume", self.driver.container_id(handle.machine_id, handle.start_seq)))
