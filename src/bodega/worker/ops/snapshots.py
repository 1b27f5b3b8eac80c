"""Volume snapshots: a consistent copy of a volume's data on its host, kept for retention.

A copy is consistent because no writer runs while it is taken: a volume whose
machine is started has that machine frozen (the cgroup freezer suspend uses)
for the copy and thawed after, under the machine's lock so no start or stop
runs between; a suspended machine is frozen already; a stopped one writes
nothing. The snapshot's row is written ``creating`` before anything is frozen,
so a worker that dies mid-copy finds it at its next start (``recover``): it
thaws the machine, drops the partial copy and marks the snapshot failed.

A snapshot lives until ``retention_days`` (the volume's ``snapshot_retention``
when it was taken) have passed, also after its volume is deleted; expired ones
are removed at the next list or snapshot on their host. A new volume created
with ``snapshot_id`` starts as a copy of it (``CreateVolume``'s provision step).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from bodega.model.errors import BadRequest, NotFound, PreconditionFailed
from bodega.model.ids import new_snapshot_id
from bodega.model.states import MachineState
from bodega.worker.core.records import MachineRow, SnapshotRow
from bodega.worker.drivers.base import DriverError
from bodega.worker.host.volume_copy import copy_tree
from bodega.worker.ops.machines import MachineService
from bodega.worker.ops.volumes import VolumeService
from bodega.worker.store import snapshot_queries as q

log = logging.getLogger("bodega.worker.snapshots")
DAY = 86400.0


class VolumeSnapshots:
    def __init__(self, volumes: VolumeService, machines: MachineService,
                 volume_dir: Callable[[str], Path], snapshot_dir: Callable[[str], Path]) -> None:
        self.volumes = volumes
        self.machines = machines
        self.store = volumes.store
        self.volume_dir = volume_dir
        self.snapshot_dir = snapshot_dir

    def get(self, snapshot_id: str, app: str) -> SnapshotRow:
        row = q.get_snapshot(self.store.db, snapshot_id)
        if row is None or row.app != app or row.status != "created":
            raise NotFound(f"snapshot not found: {snapshot_id}")
        return row

    def list(self, volume_id: str, app: str) -> list[SnapshotRow]:
        """The volume's snapshots this worker holds: those it took of its own volume, or
        the copies it keeps of another worker's (whose host may be gone)."""
        self.prune()
        rows = [row for row in q.volume_snapshots(self.store.db, volume_id) if row.app == app]
        if not rows:
            self.volumes.get(volume_id, app)  # none: a 404 unless the volume is here
        return rows

    async def take(self, volume_id: str, app: str) -> SnapshotRow:
        self.prune()
        volume = self.volumes.get(volume_id, app)
        if volume.state != "created":
            raise PreconditionFailed(f"failed_precondition: volume {volume_id} is "
                                     f"{volume.state}; only a created volume has data to copy")
        now = self.store.clock()
        row = SnapshotRow(id=new_snapshot_id(), volume_id=volume_id, app=app,
                          status="creating", size=0, digest="", volume_size_gb=volume.size_gb,
                          retention_days=volume.snapshot_retention, created_at=now,
                          expires_at=now + volume.snapshot_retention * DAY)
        with self.store.tx() as conn:
            q.insert_snapshot(conn, row)
        try:
            size, digest = await self._copy_quiet(volume.attached_machine_id, volume_id,
                                                  row.id)
        except BaseException:
            with self.store.tx() as conn:
                q.finish_snapshot(conn, row.id, "failed", 0, "")
            shutil.rmtree(self._partial(row.id), ignore_errors=True)
            raise
        with self.store.tx() as conn:
            q.finish_snapshot(conn, row.id, "created", size, digest)
            self.store.append(conn, op_id="action", resource_id=volume_id, fsm="action",
                              step="snapshot_volume", payload={"snapshot_id": row.id,
                                                               "size": size})
        log.info("%s: snapshot %s taken (%d bytes, %s)", volume_id, row.id, size, digest)
        return self.get(row.id, app)

    def _partial(self, snapshot_id: str) -> Path:
        return self.snapshot_dir(snapshot_id).with_suffix(".partial")

    async def _copy_quiet(self, machine_id: str | None, volume_id: str,
                          snapshot_id: str) -> tuple[int, str]:
        """Copy the volume while its machine (if any) cannot write; bytes and digest."""
        if machine_id is None:
            return await self._copy(volume_id, snapshot_id)
        lock = await self.machines.locks.acquire(machine_id)
        try:
            machine = self.machines.get(machine_id)
            if machine.state != MachineState.STARTED or machine.handle is None:
                return await self._copy(volume_id, snapshot_id)  # frozen or not running
            suspend = self.machines.driver.capabilities.suspend
            if suspend is None:
                raise PreconditionFailed(
                    f"failed_precondition: the {self.machines.driver.name} driver cannot "
                    f"freeze machine {machine_id} for a consistent copy; stop it first")
            try:
                await suspend.suspend(machine.handle)
                return await self._copy(volume_id, snapshot_id)
            except DriverError as exc:
                raise PreconditionFailed(f"failed_precondition: freezing machine "
                                         f"{machine_id} for the copy: {exc}") from None
            finally:
                await self._thaw(machine)
        finally:
            lock.release()

    async def _thaw(self, machine: MachineRow) -> None:
        suspend = self.machines.driver.capabilities.suspend
        if suspend is not None and machine.handle is not None:
            await suspend.resume(machine.handle)

    async def _copy(self, volume_id: str, snapshot_id: str) -> tuple[int, str]:
        partial = self._partial(snapshot_id)
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        size, digest = await asyncio.to_thread(copy_tree, self.volume_dir(volume_id), partial)
        partial.rename(self.snapshot_dir(snapshot_id))
        return size, digest

    def source_of(self, snapshot_id: str, app: str, size_gb: int) -> SnapshotRow:
        """The snapshot a new volume of ``size_gb`` is restored from; 400 if it cannot be."""
        row = self.get(snapshot_id, app)
        if size_gb < row.volume_size_gb:
            raise BadRequest(f"invalid_argument: snapshot {snapshot_id} is of a "
                             f"{row.volume_size_gb} GB volume; size_gb must be at least that")
        return row

    def prune(self) -> None:
        """Remove the snapshots past their retention."""
        for row in q.expired_snapshots(self.store.db, self.store.clock()):
            shutil.rmtree(self.snapshot_dir(row.id), ignore_errors=True)
            with self.store.tx() as conn:
                q.delete_snapshot(conn, row.id)
            log.info("%s: snapshot %s expired after %d days, removed", row.volume_id, row.id,
                     row.retention_days)

    async def recover(self) -> None:
        """Finish what a worker that died mid-snapshot left: thaw, drop the copy, fail it."""
        for row in q.snapshots_in(self.store.db, "creating"):
            volume = self.volumes.get(row.volume_id)
            if volume.attached_machine_id is not None:
                machine = self.machines.get(volume.attached_machine_id)
                if machine.state == MachineState.STARTED:
                    with contextlib.suppress(DriverError):
                        await self._thaw(machine)
            shutil.rmtree(self._partial(row.id), ignore_errors=True)
            shutil.rmtree(self.snapshot_dir(row.id), ignore_errors=True)
            with self.store.tx() as conn:
                q.finish_snapshot(conn, row.id, "failed", 0, "")
            log.warning("%s: snapshot %s was cut short by a restart; marked failed",
                        row.volume_id, row.id)
