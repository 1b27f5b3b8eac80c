"""Both drivers on one worker: the machine's config picks (an image reference: oci).

``config.image`` naming a registry host (``127.0.0.1:5000/app:v1``) runs the
image with the oci driver; anything else (``process``, the CLI's default) is
a label and the config's command runs as a host process. A run's handle
names the driver that started it, so re-adoption, waits and stops go back to
it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

from bodega.model.machine import ExitStatus, names_registry
from bodega.model.machine_config import MachineConfig
from bodega.worker.drivers.base import (
    Capabilities,
    ConsoleCommand,
    DriverError,
    ExecResult,
    GuestConsole,
    ProcessInfo,
    Suspend,
    TaskHandle,
    TaskSpec,
)
from bodega.worker.drivers.oci import OciDriver
from bodega.worker.drivers.process import ProcessDriver


class PairControl:
    def __init__(self, pair: DriverPair) -> None:
        self.pair = pair

    async def signal(self, handle: TaskHandle, signal: int) -> None:
        await self.pair.by_handle(handle).signal(handle, signal)

    async def exec(
        self, handle: TaskHandle, spec: TaskSpec, argv: list[str], timeout: float,
        stdin: bytes | None,
    ) -> ExecResult:
        return await self.pair.by_handle(handle).control.exec(handle, spec, argv, timeout,
                                                              stdin)

    def console(self, handle: TaskHandle, spec: TaskSpec, argv: list[str]
                ) -> AbstractAsyncContextManager[ConsoleCommand | GuestConsole]:
        return self.pair.by_handle(handle).control.console(handle, spec, argv)

    async def ps(self, handle: TaskHandle) -> list[ProcessInfo]:
        return await self.pair.by_handle(handle).control.ps(handle)


class PairSuspend:
    """Suspend goes to the driver that runs the machine, when that driver can."""

    def __init__(self, pair: DriverPair) -> None:
        self.pair = pair

    def _of(self, handle: TaskHandle) -> Suspend:
        suspend = self.pair.by_handle(handle).capabilities.suspend
        if suspend is None:
            raise DriverError(f"the {handle.driver} driver cannot suspend a machine here")
        return suspend

    async def suspend(self, handle: TaskHandle) -> None:
        await self._of(handle).suspend(handle)

    async def resume(self, handle: TaskHandle) -> TaskHandle:
        return await self._of(handle).resume(handle)


class DriverPair:
    name = "process+oci"

    def __init__(self, process: ProcessDriver, oci: OciDriver) -> None:
        self.process = process
        self.oci = oci
        self.capabilities = Capabilities(
            needs_command=True, images=oci.capabilities.images, own_netns=True,
            control=PairControl(self),
            parking=process.capabilities.parking, logs=process.capabilities.logs,
            suspend=PairSuspend(self) if process.capabilities.suspend else None,
            # Both put a machine in the same cgroups, named by its id (runc's cgroupsPath).
            memory=process.capabilities.memory,
            warmup=self if oci.capabilities.warmup is not None else None,
            isolations=oci.capabilities.isolations,  # a sandbox runs an image: oci's
            vm_accel=oci.capabilities.vm_accel,
        )

    def start_coming(self, machine_id: str, config: MachineConfig) -> bool:
        """Only an image machine's start waits on the kernel's cgroup lock: a process
        machine's mostly takes a launcher parked in its cgroups ahead (``parking.py``)."""
        return names_registry(config.image) and self.oci.start_coming(machine_id, config)

    def start_called_off(self, machine_id: str) -> None:
        self.oci.start_called_off(machine_id)

    @property
    def warmup_moves(self) -> int:
        return self.oci.warmup_moves

    def by_spec(self, spec: TaskSpec) -> ProcessDriver | OciDriver:
        return self.oci if names_registry(spec.image) else self.process

    def by_handle(self, handle: TaskHandle) -> ProcessDriver | OciDriver:
        return self.oci if handle.driver == self.oci.name else self.process

    async def prepare(self, spec: TaskSpec) -> None:
        await self.by_spec(spec).prepare(spec)

    async def start(self, spec: TaskSpec) -> TaskHandle:
        return await self.by_spec(spec).start(spec)

    async def recover(self, handle: TaskHandle) -> bool:
        return await self.by_handle(handle).recover(handle)

    async def wait(self, handle: TaskHandle) -> ExitStatus:
        return await self.by_handle(handle).wait(handle)

    async def stop(self, handle: TaskHandle, signal: int, timeout: float) -> None:
        await self.by_handle(handle).stop(handle, signal, timeout)

    async def inspect(self, handle: TaskHandle) -> bool:
        return await self.by_handle(handle).inspect(handle)

    async def destroy(self, machine_id: str, machine_dir: Path) -> None:
        if OciDriver.bundle(machine_dir).exists():
            await self.oci.destroy(machine_id, machine_dir)
        await self.process.destroy(machine_id, machine_dir)
