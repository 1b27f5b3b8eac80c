"""Volumes through the broker: placed like machines (by disk), then owned by their host.

A volume is a slice of one worker's disk, so creating one is a placement
(filtered also on the ``compute`` hint, so the host can run the machine that
will mount it, and on ``require_unique_zone``: no two volumes of one name on
a host) and everything after goes to that worker.
"""

from __future__ import annotations

from bodega.broker.apps import Apps
from bodega.broker.catalog import Catalog, volume_rows
from bodega.broker.host_status import with_host_status
from bodega.broker.machines import Machines
from bodega.broker.placer import Placer
from bodega.broker.workers import Workers
from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, NotFound
from bodega.model.volume import ExtendVolumeAnswer, Volume
from bodega.placement import PlacementRequest
from bodega.wire.fly import CreateVolumeRequest
from bodega.wire.worker_calls import CreateVolumeBody, ExtendVolumeBody, WorkerRequest
from bodega.wire.worker_client import wire_bytes


class Volumes:
    def __init__(self, catalog: Catalog, workers: Workers, placer: Placer, apps: Apps,
                 machines: Machines) -> None:
        self.catalog = catalog
        self.workers = workers
        self.placer = placer
        self.apps = apps
        self.machines = machines

    def app_volumes(self, app: str) -> list[Volume]:
        found = {v.id: v for v in volume_rows(self.catalog, app=app)}
        for volume in self.workers.volumes.all():
            if volume.app == app:
                found[volume.id] = volume
        return sorted(found.values(), key=lambda v: (v.created_at, v.id))

    def list(self, app: str, include_deleted: bool = False) -> list[Volume]:
        self.apps.require(app)
        return [with_host_status(v, self.catalog.member_status).public()
                for v in self.app_volumes(app) if include_deleted or v.state != "destroyed"]

    async def create(self, app: str, body: CreateVolumeRequest) -> Volume:
        self.apps.require(app)
        if body.snapshot_id or body.source_volume_id:
            raise BadRequest("unimplemented: restoring snapshots and forking volumes are not "
                             "supported yet; create an empty volume", status="unimplemented")
        regions = self.machines.regions(body.region)
        guest = body.compute
        ask = Ask(cpu_kind=guest.cpu_kind, cpus=guest.cpus, memory_mb=guest.memory_mb,
                  disk_gb=body.size_gb) if guest else Ask(cpus=0, memory_mb=0, disk_gb=body.size_gb)
        avoid: frozenset[str] = frozenset()
        if body.require_unique_zone:
            avoid = frozenset(v.worker for v in self.app_volumes(app)
                              if v.name == body.name and v.state != "destroyed" and v.worker)
        request = PlacementRequest(
            app=app, ask=ask, regions=regions, avoid=avoid,
            avoid_reason=f"a volume named {body.name!r} is already on this host")
        wire = CreateVolumeBody(app=app, name=body.name, size_gb=body.size_gb,
                                encrypted=body.encrypted, fstype=body.fstype,
                                snapshot_retention=body.snapshot_retention,
                                auto_backup_enabled=body.auto_backup_enabled,
                                require_unique_zone=body.require_unique_zone)

        async def ask_worker(worker: str, _reservation: str | None) -> Volume:
            return await self.workers.client(worker).create_volume(wire)

        record = self.placer.record(request)
        volume, _ = await self.placer.place(request, ask_worker, record,
                                            claim=Ask(cpus=0, memory_mb=0, disk_gb=body.size_gb),
                                            hedge=False)
        self.workers.note_volume(volume)
        return volume.public()

    def locate(self, app: str, volume_id: str) -> str:
        self.apps.require(app)
        if not volume_id.startswith("vol_"):
            raise NotFound(f"volume not found: {volume_id}")
        return self.workers.locate("volumes", volume_id, app)

    async def call(self, app: str, volume_id: str, method: str,
                   body: WorkerRequest | None = None) -> Volume:
        """Read, update or delete the volume on its worker; the answer is the volume."""
        worker = self.locate(app, volume_id)
        volume = await self.workers.client(worker).answer(
            Volume, method, f"/v1/volumes/{volume_id}", encoded=wire_bytes(body),
            params={"app": app})
        self.workers.note_volume(volume)
        return volume.public()

    async def extend(self, app: str, volume_id: str, size_gb: int) -> ExtendVolumeAnswer:
        worker = self.locate(app, volume_id)
        extended = await self.workers.client(worker).answer(
            ExtendVolumeAnswer, "PUT", f"/v1/volumes/{volume_id}/extend",
            encoded=wire_bytes(ExtendVolumeBody(size_gb=size_gb)), params={"app": app})
        self.workers.note_volume(extended.volume)
        return extended.model_copy(update={"volume": extended.volume.public()})
