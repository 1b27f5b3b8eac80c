"""Suspend for a vm machine: its state to a snapshot file and its qemu ended; a resume boots
a new qemu from that file.

A suspend stops the VM's vCPUs, writes its memory and devices to ``vm/snapshot`` (QMP
``migrate`` to a partial file, fsynced and renamed: only a whole snapshot has that
name) and ends qemu (QMP ``quit``): a suspended vm holds no process and no guest memory
on its host. Its room stays held in the worker's ledger, as every suspended machine's
does, so that a resume never waits for it. qemu's wrapper (``qemu.RUN``) undoes the
VM's tap and redirect on its way out, as at any end.

A resume (a start of the suspended machine, or the thaw before its stop, update or
destroy) runs a new qemu with the argv of the boot it resumes (``qemu.launch_record``):
the same disks, MAC and sockets, its tap made again by ``qemu.RUN``, and ``-incoming
defer``; it gives qemu the snapshot (``migrate-incoming``), lets it run once loaded
(``cont``) and deletes the snapshot. The run goes on in the same run files and start
number, in a new process (``Runs.respawned``): the handle that is returned is the one
to record. A snapshot that is missing or does not load (torn, or of another qemu) boots
the machine cold instead, with this worker's kernel and init, and its log says why. A
kept kernel or initramfs file that has gone (a newer init's replaces the older) is
the worker's current one for a resume too: the guest's memory holds its own.
``migration.py`` decides each step from what qemu and the files say, so a worker killed
anywhere repeats only the step it was in; a qemu started by a resume the worker did not
live to record is found by the run's pidfile (``Runs.successor``).

Another machine's suspend goes to the driver's own (``other``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
import signal as signals
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from bodega.model.machine import ExitStatus
from bodega.runtime.waits import within
from bodega.worker.drivers.base import DriverError, Suspend, TaskHandle
from bodega.worker.drivers.process.logfiles import log_path
from bodega.worker.drivers.process.runs import Runs
from bodega.worker.drivers.vm.core.config import STATUS_BYTES
from bodega.worker.drivers.vm.core.migration import (
    Migration,
    ResumeStep,
    RunStatus,
    SuspendStep,
    resume_step,
    suspend_step,
)
from bodega.worker.drivers.vm.core.qemu import launch_of, qmp_socket
from bodega.worker.drivers.vm.machines import LAUNCH, VmMachines, keep_launch, wrapper_program

log = logging.getLogger("bodega.worker.vm")
QMP_TIMEOUT = 60.0  # seconds a QMP command may take, or a new qemu to answer on QMP
MIGRATION_TIMEOUT = 120.0  # seconds a snapshot may take to be written or loaded
SNAPSHOT = "snapshot"
PARTIAL = "snapshot.partial"


class VmRuns(Protocol):
    machines_dir: Path
    runs: Runs
    vm: VmMachines | None  # the kernel and initramfs this worker boots

    def vm_of(self, machine_dir: Path) -> str | None: ...

    async def inspect(self, handle: TaskHandle) -> bool: ...

    async def wait(self, handle: TaskHandle) -> ExitStatus: ...

    async def respawn(self, handle: TaskHandle, program: list[str], memory_mb: int,
                      cpus: int) -> TaskHandle: ...


class QmpError(BaseModel):
    model_config = ConfigDict(extra="ignore")
    desc: str = ""


class QmpAnswer(BaseModel):
    """QMP's answer to one command (events, which have neither field, are skipped)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    returned: dict[str, object] = Field(default_factory=dict, alias="return")
    error: QmpError | None = None


Command = tuple[str, Mapping[str, object]]  # execute, arguments


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
    except OSError as exc:  # qemu went away mid-answer
        raise DriverError(f"the VM's QMP socket: {exc}") from exc
    except TimeoutError:
        raise DriverError(f"qemu did not answer on QMP in {QMP_TIMEOUT:.0f}s") from None
    finally:
        writer.close()


async def vm_state(socket: Path) -> tuple[RunStatus, Migration]:
    status, migration = await qmp(socket, ("query-status", {}), ("query-migrate", {}))
    return (RunStatus.model_validate(status.returned),
            Migration.model_validate(migration.returned))


async def migrated(socket: Path) -> None:
    """Until the migration under way, in or out, has completed; a ``DriverError`` if it
    failed."""
    while True:
        [answer] = await qmp(socket, ("query-migrate", {}))
        try:
            if Migration.model_validate(answer.returned).ended():
                return
        except ValueError as exc:
            raise DriverError(f"the VM's snapshot: {exc}") from None
        await asyncio.sleep(0.02)


async def migrated_within(socket: Path, seconds: float) -> None:
    try:
        await within(migrated(socket), seconds)
    except TimeoutError:
        raise DriverError(f"the VM's snapshot took over {seconds:.0f}s") from None


def keep(partial: Path, snapshot: Path) -> None:
    """``partial``, whole, on disk under ``snapshot``'s name."""
    with partial.open("rb") as written:
        os.fsync(written.fileno())
    partial.rename(snapshot)
    directory = os.open(snapshot.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class VmSuspend:
    def __init__(self, runs: VmRuns, other: Suspend) -> None:
        self.runs = runs
        self.other = other
        # Machines whose suspend failed as their VM had ended on its own: the resume that
        # undoes a failed suspend has nothing to let go on, and must boot nothing.
        self._ended: set[str] = set()

    def _directory(self, machine_id: str) -> Path | None:
        """The machine's vm directory, if it runs a VM."""
        machine_dir = self.runs.machines_dir / machine_id
        return machine_dir / "vm" if self.runs.vm_of(machine_dir) is not None else None

    # -- suspend ------------------------------------------------------------------------
    async def suspend(self, handle: TaskHandle) -> None:
        directory = self._directory(handle.machine_id)
        if directory is None:
            await self.other.suspend(handle)
            return
        snapshot, partial = directory / SNAPSHOT, directory / PARTIAL
        socket = qmp_socket(handle.machine_id)
        for _ in range(len(SuspendStep) + 1):  # MIGRATE, KEEP, QUIT at most, after a WAIT
            if not await self.runs.inspect(handle):
                if snapshot.exists():
                    return  # its qemu ended after its snapshot was kept
                self._ended.add(handle.machine_id)
                raise DriverError("the VM ended before its snapshot was written")
            try:
                step = suspend_step(*await vm_state(socket), partial.exists(),
                                    snapshot.exists())
            except DriverError:
                if not snapshot.exists():
                    raise
                step = SuspendStep.QUIT  # qemu is on its way out after a quit
            match step:
                case SuspendStep.WAIT:
                    await migrated_within(socket, MIGRATION_TIMEOUT)
                case SuspendStep.MIGRATE:
                    snapshot.unlink(missing_ok=True)  # of an earlier stop: the VM ran since
                    partial.unlink(missing_ok=True)
                    await qmp(socket, ("stop", {}),
                              ("migrate", {"uri": f"exec:cat > {shlex.quote(str(partial))}"}))
                    await migrated_within(socket, MIGRATION_TIMEOUT)
                case SuspendStep.KEEP:
                    await asyncio.to_thread(keep, partial, snapshot)
                case SuspendStep.QUIT:
                    with contextlib.suppress(DriverError):  # it may close before it answers
                        await qmp(socket, ("quit", {}))
                    try:
                        await within(self.runs.wait(handle), QMP_TIMEOUT)
                    except TimeoutError:
                        raise DriverError("qemu did not end after its quit") from None
                    log.info("%s: suspended to its snapshot, qemu ended", handle.machine_id)
                    return
        raise DriverError("the VM's suspend did not settle")

    # -- resume -------------------------------------------------------------------------
    async def resume(self, handle: TaskHandle) -> TaskHandle:
        """The run going on: ``handle``'s qemu, else one that loaded the snapshot (or, with
        none whole, booted cold) in its place."""
        directory = self._directory(handle.machine_id)
        if directory is None:
            return await self.other.resume(handle)
        if handle.machine_id in self._ended:
            self._ended.discard(handle.machine_id)
            return handle
        # The suspend's own qemu (a suspend that failed before its end), or the one an
        # earlier resume started before its worker was killed.
        going = handle if await self.runs.inspect(handle) else self.runs.runs.successor(handle)
        if going is not None:
            socket = qmp_socket(handle.machine_id)
            try:
                step = resume_step(*await vm_state(socket))
            except DriverError:
                step = ResumeStep.REDO
            if step is not ResumeStep.REDO:
                if step is ResumeStep.CONT:
                    await qmp(socket, ("cont", {}))
                (directory / SNAPSHOT).unlink(missing_ok=True)  # the VM has run on
                return going
            await self.runs.runs.stop(going, signals.SIGKILL, QMP_TIMEOUT)
        return await self._resumed(handle, directory)

    async def _resumed(self, handle: TaskHandle, directory: Path) -> TaskHandle:
        """A new qemu for ``handle``'s ended run: from its snapshot, else booted cold."""
        try:
            kept = launch_of((directory / LAUNCH).read_bytes())
        except (OSError, ValueError) as exc:
            raise DriverError(f"the VM's launch is not kept ({exc}): it cannot go on; "
                              "stop it and start it again") from exc
        # A cold boot boots this worker's kernel and init (which answers signals). A resume
        # runs the kept argv, but the guest's memory holds its kernel and init: qemu reads
        # their files only to start, so one that went (a newer init's initramfs replaces
        # the older) is this worker's too, and the kept launch still says what its init is.
        current = kept if self.runs.vm is None else replace(
            kept, vmlinuz=self.runs.vm.kernel.vmlinuz, initramfs=self.runs.vm.initramfs,
            init_answers_signals=True)
        launch = kept if kept.vmlinuz.exists() and kept.initramfs.exists() else current
        snapshot = directory / SNAPSHOT
        memory_mb = VmMachines.memory_mb(launch.memory_mb)
        why = "it has no snapshot"
        if snapshot.exists():
            resumed = await self.runs.respawn(
                handle, wrapper_program(replace(launch, incoming=True)), memory_mb, launch.cpus)
            try:
                await self._load(resumed, snapshot)
                snapshot.unlink()
                log.info("%s: resumed from its snapshot", handle.machine_id)
                return resumed
            except DriverError as exc:
                why = f"its snapshot did not load: {exc}"
                await self.runs.runs.stop(resumed, signals.SIGKILL, QMP_TIMEOUT)
        log.warning("%s: %s; booting it afresh", handle.machine_id, why)
        say(directory.parent, f"the VM could not resume ({why}); booting it afresh")
        snapshot.unlink(missing_ok=True)
        if current.status is not None:  # the init's code, once it writes one, is the new boot's
            current.status.write_bytes(b"\0" * STATUS_BYTES)
        keep_launch(directory, current)
        return await self.runs.respawn(handle, wrapper_program(current), memory_mb, current.cpus)

    async def _load(self, resumed: TaskHandle, snapshot: Path) -> None:
        """Give the new qemu the snapshot, and let it run once loaded."""
        socket = qmp_socket(resumed.machine_id)

        async def answering() -> None:
            while True:  # the socket's path is the ended qemu's until the new one binds it
                try:
                    await qmp(socket)
                    return
                except DriverError:
                    if not await self.runs.inspect(resumed):
                        raise DriverError("qemu ended before it answered on QMP") from None
                await asyncio.sleep(0.01)

        try:
            await within(answering(), QMP_TIMEOUT)
        except TimeoutError:
            raise DriverError(f"qemu did not answer on QMP in {QMP_TIMEOUT:.0f}s") from None
        await qmp(socket, ("migrate-incoming",
                           {"uri": f"exec:cat {shlex.quote(str(snapshot))}"}))
        await migrated_within(socket, MIGRATION_TIMEOUT)
        await qmp(socket, ("cont", {}))


def say(machine_dir: Path, line: str) -> None:
    """``line`` in the machine's own log, where its user looks."""
    with contextlib.suppress(OSError), log_path(machine_dir).open("a") as machine_log:
        machine_log.write(f"[bodega] {line}\n")
