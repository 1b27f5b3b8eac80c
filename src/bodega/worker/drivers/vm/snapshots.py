"""Suspend for a vm machine: its vCPUs stopped by QMP, and a snapshot of it to a file.

A suspend stops the VM where it stands (QMP ``stop``: its memory stays in qemu, as a
frozen container's stays in its cgroup, so a resume never waits for room) and writes
its state, memory and devices, to ``vm/snapshot`` with QMP ``migrate``; a resume is
QMP ``cont``. The snapshot is what a qemu started with ``-incoming`` resumes from
(``qemu.VmLaunch.incoming``; ``bench/isolation.py`` times one against a cold boot).
Both steps are idempotent, as every driver step must be: ``query-status`` says whether
the VM is paused first. Another machine's suspend goes to the driver's own (``other``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from bodega.runtime.waits import within
from bodega.worker.drivers.base import DriverError, Suspend, TaskHandle
from bodega.worker.drivers.vm.qemu import qmp_socket

QMP_TIMEOUT = 60.0  # seconds a QMP command, a snapshot's migration among them, may take
SNAPSHOT = "snapshot"


class VmRuns(Protocol):
    machines_dir: Path

    def vm_of(self, machine_dir: Path) -> str | None: ...


class QmpError(BaseModel):
    model_config = ConfigDict(extra="ignore")
    desc: str = ""


class QmpAnswer(BaseModel):
    """QMP's answer to one command (events, which have neither field, are skipped)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    returned: dict[str, object] = Field(default_factory=dict, alias="return")
    error: QmpError | None = None


Command = tuple[str, Mapping[str, str]]  # execute, arguments


async def qmp(socket: Path, *commands: Command) -> list[QmpAnswer]:
    """Run ``commands`` on a QMP socket in order; their answers. A ``DriverError`` names
    a refused one."""
    try:
        reader, writer = await asyncio.open_unix_connection(str(socket))
    except OSError as exc:
        raise DriverError(f"the VM's QMP socket: {exc}") from exc

    async def answer() -> QmpAnswer:
        while True:
            line = await reader.readline()
            if not line:
                raise DriverError("qemu closed its QMP socket")
            message = json.loads(line)
            if "return" in message or "error" in message:
                return QmpAnswer.model_validate(message)

    try:
        await reader.readline()  # the greeting
        answers = []
        for execute, arguments in (("qmp_capabilities", {}), *commands):
            command = {"execute": execute, **({"arguments": dict(arguments)} if arguments else {})}
            writer.write(json.dumps(command).encode() + b"\n")
            await writer.drain()
            reply = await within(answer(), QMP_TIMEOUT)
            if reply.error is not None:
                raise DriverError(f"qemu {execute}: {reply.error.desc}")
            answers.append(reply)
        return answers[1:]
    finally:
        writer.close()


async def migrated(socket: Path) -> None:
    """Until the migration under way has completed; a ``DriverError`` if it failed."""
    while True:
        [status] = await qmp(socket, ("query-migrate", {}))
        state = status.returned.get("status")
        if state == "completed":
            return
        if state in ("failed", "cancelled"):
            raise DriverError(f"the VM's snapshot {state}: "
                              f"{status.returned.get('error-desc')}")
        await asyncio.sleep(0.05)


class VmSuspend:
    def __init__(self, runs: VmRuns, other: Suspend) -> None:
        self.runs = runs
        self.other = other

    def _vm(self, handle: TaskHandle) -> bool:
        return self.runs.vm_of(self.runs.machines_dir / handle.machine_id) is not None

    async def paused(self, handle: TaskHandle) -> bool:
        [status] = await qmp(qmp_socket(handle.machine_id), ("query-status", {}))
        return status.returned.get("running", True) is False

    async def suspend(self, handle: TaskHandle) -> None:
        if not self._vm(handle):
            await self.other.suspend(handle)
            return
        if await self.paused(handle):
            return
        snapshot = self.runs.machines_dir / handle.machine_id / "vm" / SNAPSHOT
        socket = qmp_socket(handle.machine_id)
        await qmp(socket, ("stop", {}), ("migrate", {"uri": f"exec:cat > {snapshot}"}))
        await migrated(socket)

    async def resume(self, handle: TaskHandle) -> None:
        if not self._vm(handle):
            await self.other.resume(handle)
            return
        if await self.paused(handle):
            await qmp(qmp_socket(handle.machine_id), ("cont", {}))
