"""The worker's volume routes."""

from __future__ import annotations

import shutil

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from bodega.model.errors import BadRequest
from bodega.model.volume import ExtendVolumeAnswer
from bodega.wire.internal import worker_calls as wire
from bodega.wire.transport.http import answer_response, query_bool, read_model
from bodega.worker.api.machine_routes import RouteSpec
from bodega.worker.api.render import snapshot_answer, volume_answer
from bodega.worker.ops.snapshot_copies import HEADER, SnapshotCopies
from bodega.worker.ops.volumes import VolumeRequest, VolumeService


def required_app(request: Request) -> str:
    app = request.query_params.get("app")
    if not app:
        raise BadRequest("the app query parameter is required")
    return app


class VolumeRoutes:
    def __init__(self, *, name: str, region: str, volumes: VolumeService,
                 copies: SnapshotCopies) -> None:
        self.name = name
        self.region = region
        self.volumes = volumes
        self.copies = copies
        self.snapshots = copies.snapshots

    def routes(self) -> list[RouteSpec]:
        v = "/v1/volumes/{id}"
        return [
            ("/v1/volumes", "GET", self.list_volumes),
            ("/v1/volumes", "POST", self.create_volume),
            (v, "GET", self.get_volume),
            (v, "PUT", self.update_volume),
            (v, "DELETE", self.delete_volume),
            (f"{v}/extend", "PUT", self.extend_volume),
            (f"{v}/snapshots", "GET", self.list_snapshots),
            (f"{v}/snapshots", "POST", self.take_snapshot),
            ("/v1/snapshots/{id}", "GET", self.get_snapshot),
            ("/v1/snapshots/{id}/data", "GET", self.send_snapshot),
            ("/v1/snapshots/{id}/data", "PUT", self.receive_snapshot),
        ]

    async def list_volumes(self, request: Request) -> Response:
        rows = self.volumes.list(request.query_params.get("app"),
                                 query_bool(request, "include_deleted"))
        return answer_response([volume_answer(row, worker=self.name) for row in rows])

    async def create_volume(self, request: Request) -> Response:
        body = await read_model(request, wire.CreateVolumeBody)
        if body.snapshot_id is not None:  # from this worker's store, or fetched from a holder
            await self.copies.fetch(body.snapshot_id, body.app, body.snapshot_holders)
            self.snapshots.source_of(body.snapshot_id, body.app, body.size_gb)
        fields = body.model_dump(exclude={"snapshot_holders"})
        row = await self.volumes.create(VolumeRequest(**fields, region=self.region))
        return answer_response(volume_answer(row, worker=self.name))

    async def get_volume(self, request: Request) -> Response:
        row = self.volumes.get(request.path_params["id"], request.query_params.get("app"))
        return answer_response(volume_answer(row, worker=self.name))

    async def update_volume(self, request: Request) -> Response:
        body = await read_model(request, wire.UpdateVolumeBody)
        row = self.volumes.update(request.path_params["id"], required_app(request),
                                  body.snapshot_retention, body.auto_backup_enabled)
        return answer_response(volume_answer(row, worker=self.name))

    async def delete_volume(self, request: Request) -> Response:
        row = await self.volumes.delete(request.path_params["id"], required_app(request))
        return answer_response(volume_answer(row, worker=self.name))

    async def extend_volume(self, request: Request) -> Response:
        body = await read_model(request, wire.ExtendVolumeBody)
        row, needs_restart = self.volumes.extend(request.path_params["id"],
                                                 required_app(request), body.size_gb)
        return answer_response(ExtendVolumeAnswer(volume=volume_answer(row, worker=self.name),
                                                  needs_restart=needs_restart))

    async def list_snapshots(self, request: Request) -> Response:
        rows = self.snapshots.list(request.path_params["id"], required_app(request))
        return answer_response([snapshot_answer(row, self.name) for row in rows])

    async def take_snapshot(self, request: Request) -> Response:
        row = await self.copies.take(request.path_params["id"], required_app(request))
        return answer_response(snapshot_answer(row, self.name))

    async def get_snapshot(self, request: Request) -> Response:
        row = self.snapshots.get(request.path_params["id"], required_app(request))
        return answer_response(snapshot_answer(row, self.name))

    async def send_snapshot(self, request: Request) -> Response:
        """The snapshot's tree as a tar stream, for a worker restoring it."""
        meta, archive = await self.copies.archive(request.path_params["id"],
                                                  required_app(request))
        return FileResponse(archive, media_type="application/x-tar",
                            headers={HEADER: meta.model_dump_json()},
                            background=BackgroundTask(shutil.rmtree, archive.parent, True))

    async def receive_snapshot(self, request: Request) -> Response:
        """Keep a copy of another worker's snapshot (its digest checked first)."""
        header = request.headers.get(HEADER)
        if header is None:
            raise BadRequest(f"invalid_argument: the {HEADER} header is required")
        try:
            meta = wire.SnapshotCopy.model_validate_json(header)
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: {HEADER}: {exc}") from None
        if meta.id != request.path_params["id"]:
            raise BadRequest(f"invalid_argument: {HEADER} describes snapshot {meta.id}")
        row = await self.copies.receive(meta, request.stream())
        return answer_response(snapshot_answer(row, self.name))
