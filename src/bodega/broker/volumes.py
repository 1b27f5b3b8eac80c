"""Volumes through the broker: placed like machines (by disk), then owned by their host.

A volume is a slice of one worker's disk, so creating one is a placement
(filtered also on the ``compute`` hint, so the host can run the machine that
will mount it, and on ``require_unique_zone``: no two volumes of one name on
a host) and everything after goes to that worker.
"""

from __future__ import annotations

from typing import Any

from bodega.broker.apps import Apps
from bodega.broker.catalog import Catalog
from bodega.broker.host_status import with_host_status
from bodega.broker.machines import Machines
from bodega.broker.placer import Placer
from bodega.broker.workers import Workers
from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, NotFound
from bodega.placement import PlacementRequest
from bodega.wire.fly import CreateVolumeRequest
from bodega.wire.worker_calls import CreateVolumeBody, WorkerRequest

INTERNAL_FIELDS = ("app", "worker")


def public(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in INTERNAL_FIELDS}


class Volumes:
    def __init__(self, catalog: Catalog, workers: Workers, placer: Placer, apps: Apps,
                 machines: Machines) -> None:
        self.catalog = catalog
        self.workers = workers
        self.placer = placer
        self.apps = apps
        self.machines = machines

    def app_volumes(self, app: str) -> list[dict[str, Any]]:
        docs = {str(d["id"]): d for d in self.catalog.rows("volumes", app=app)}
        for doc in self.workers.volumes.all():
            if doc.get("app") == app:
                docs[str(doc["id"])] = doc
        return sorted(docs.values(), key=lambda d: (str(d.get("created_at", "")), str(d["id"])))

    def list(self, app: str, include_deleted: bool = False) -> list[dict[str, Any]]:
        self.apps.require(app)
        return [public(with_host_status(d, self.catalog.member_status))
                for d in self.app_volumes(app) if include_deleted or d.get("state") != "destroyed"]

    async def create(self, app: str, body: CreateVolumeRequest) -> dict[str, Any]:
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
            avoid = frozenset(str(d["worker"]) for d in self.app_volumes(app)
                              if d.get("name") == body.name and d.get("state") != "destroyed")
        request = PlacementRequest(
            app=app, ask=ask, regions=regions, avoid=avoid,
            avoid_reason=f"a volume named {body.name!r} is already on this host")
        wire = CreateVolumeBody(app=app, name=body.name, size_gb=body.size_gb,
                                encrypted=body.encrypted, fstype=body.fstype,
                                snapshot_retention=body.snapshot_retention,
                                auto_backup_enabled=body.auto_backup_enabled,
                                require_unique_zone=body.require_unique_zone)

        async def ask_worker(worker: str, _reservation: str | None) -> dict[str, Any]:
            return dict(await self.workers.client(worker).create_volume(wire))

        record = self.placer.record(request)
        volume, _ = await self.placer.place(request, ask_worker, record,
                                            claim=Ask(cpus=0, memory_mb=0, disk_gb=body.size_gb),
                                            hedge=False)
        self.workers.note("volumes", volume)
        return public(volume)

    def locate(self, app: str, volume_id: str) -> str:
        self.apps.require(app)
        if not volume_id.startswith("vol_"):
            raise NotFound(f"volume not found: {volume_id}")
        return self.workers.locate("volumes", volume_id, app)

    async def forward(self, app: str, volume_id: str, method: str, action: str = "",
                      body: WorkerRequest | None = None) -> dict[str, Any]:
        worker = self.locate(app, volume_id)
        path = f"/v1/volumes/{volume_id}" + (f"/{action}" if action else "")
        result = await self.workers.client(worker).send(method, path, body, params={"app": app})
        if isinstance(result, dict) and "volume" in result:  # extend
            self.workers.note("volumes", result["volume"])
            return {**result, "volume": public(result["volume"])}
        self.workers.note("volumes", dict(result))
        return public(dict(result))
