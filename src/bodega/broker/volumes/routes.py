"""``/v1/apps/{app}/volumes``: Fly's volume routes, each handed to the volume's worker.

A volume lives on one worker, as its machine does; ``Volumes`` finds it, forwards,
and answers the volume (``Volume``) without the worker's internal fields.
A snapshot is taken, kept and listed by the volume's worker (``worker/ops/snapshots.py``);
a volume created from one (``snapshot_id``, or ``source_volume_id``: a snapshot of the
source taken then) is placed on that worker, where the data is.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.volumes.service import Volumes
from bodega.wire.internal import worker_calls as wire
from bodega.wire.public import fly
from bodega.wire.transport.http import RouteMaker, answer_response, query_bool, read_model


def volume_routes(r: RouteMaker, volumes: Volumes) -> list[Route]:
    async def forward(request: Request, method: str,
                      body: wire.WorkerRequest | None = None) -> Response:
        return answer_response(await volumes.call(
            request.path_params["app"], request.path_params["vid"], method, body))

    async def list_volumes(request: Request, who: Principal) -> Response:
        return answer_response(volumes.list(request.path_params["app"],
                                            query_bool(request, "include_deleted")))

    async def create_volume(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.CreateVolumeRequest)
        return answer_response(await volumes.create(request.path_params["app"], body))

    async def get_volume(request: Request, who: Principal) -> Response:
        return await forward(request, "GET")

    async def update_volume(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.UpdateVolumeRequest)
        return await forward(request, "PUT", body=wire.UpdateVolumeBody(
            snapshot_retention=body.snapshot_retention,
            auto_backup_enabled=body.auto_backup_enabled))

    async def delete_volume(request: Request, who: Principal) -> Response:
        return await forward(request, "DELETE")

    async def extend_volume(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.ExtendVolumeRequest)
        return answer_response(await volumes.extend(
            request.path_params["app"], request.path_params["vid"], body.size_gb))

    async def volume_snapshots(request: Request, who: Principal) -> Response:
        return answer_response(await volumes.snapshots(request.path_params["app"],
                                                       request.path_params["vid"]))

    async def take_snapshot(request: Request, who: Principal) -> Response:
        return answer_response(await volumes.take_snapshot(request.path_params["app"],
                                                           request.path_params["vid"]))

    one = "/v1/apps/{app}/volumes/{vid}"
    return [
        r("/v1/apps/{app}/volumes", list_volumes, "GET"),
        r("/v1/apps/{app}/volumes", create_volume, "POST"),
        r(one, get_volume, "GET"),
        r(one, update_volume, "PUT"),
        r(one, delete_volume, "DELETE"),
        r(f"{one}/extend", extend_volume, "PUT"),
        r(f"{one}/snapshots", volume_snapshots, "GET"),
        r(f"{one}/snapshots", take_snapshot, "POST"),
    ]
