"""A machine's lease and metadata: ``.../machines/{id}/lease`` and ``.../metadata``.

Both live on the machine's worker, which checks the lease nonce; the broker
validates what it can say no to at once (a metadata key's shape) and
forwards the rest with a typed body. A lease is owned by the token that took
it, so a deploy token's lease is not another token's.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.machines.routes import MACHINE, forward
from bodega.broker.machines.service import Machines
from bodega.model.errors import BadRequest
from bodega.model.limits import check_metadata_key
from bodega.wire.internal import worker_calls as wire
from bodega.wire.public import fly
from bodega.wire.transport.http import RouteMaker, read_model


def lease_routes(r: RouteMaker, machines: Machines) -> list[Route]:
    async def get_lease(request: Request, who: Principal) -> Response:
        return await forward(machines, request, "GET", "lease")

    async def acquire_lease(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.CreateLeaseRequest, required=False)
        params = {"ttl": request.query_params["ttl"]} if "ttl" in request.query_params else {}
        return await forward(machines, request, "POST", "lease", status=201, params=params,
                             body=wire.LeaseBody(ttl=body.ttl, description=body.description),
                             owner=who.token_id)

    async def release_lease(request: Request, who: Principal) -> Response:
        return await forward(machines, request, "DELETE", "lease")

    async def replace_metadata(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.UpdateMetadataRequest)
        await forward(machines, request, request.method, "metadata", body=wire.MetadataBody(
            metadata=body.metadata, machine_version=body.machine_version))
        return Response(status_code=204)

    async def metadata_key(request: Request, who: Principal) -> Response:
        key = request.path_params["key"]
        try:
            check_metadata_key(key)
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: {exc}") from None
        action = f"metadata/{quote(key, safe='')}"  # one path segment on the worker too
        if request.method == "GET":
            return await forward(machines, request, "GET", action)
        value = None
        if request.method == "POST":
            upsert = await read_model(request, fly.UpsertMetadataKeyRequest)
            value = wire.MetadataValueBody(value=upsert.value)
        await forward(machines, request, request.method, action, body=value)
        return Response(status_code=204)

    m = MACHINE
    return [
        r(f"{m}/lease", get_lease, "GET"),
        r(f"{m}/lease", acquire_lease, "POST"),
        r(f"{m}/lease", release_lease, "DELETE"),
        r(f"{m}/metadata", replace_metadata, "PUT"),
        r(f"{m}/metadata", replace_metadata, "PATCH"),
        r(f"{m}/metadata/{{key}}", metadata_key, "GET"),
        r(f"{m}/metadata/{{key}}", metadata_key, "POST"),
        r(f"{m}/metadata/{{key}}", metadata_key, "DELETE"),
    ]
