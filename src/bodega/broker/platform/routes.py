"""Where machines could go and what the cluster is: placements, regions, members, workers.

``/v1/platform/*`` is what flyctl asks before it creates (Fly's own routes);
``/v1/cluster/*`` is bodega's, for operators (admin tokens only); ``/v1/cluster``
itself tells any client (an app's deploy token too) what it needs to deploy
there: where the cluster's image registries are (every live one, this broker's
host's first).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.platform.hosts import Hosts, host_routes
from bodega.broker.platform.service import Platform, ask_for
from bodega.model.errors import BadRequest
from bodega.model.machine_config import Guest, preset
from bodega.wire.public import fly
from bodega.wire.public.cluster_info import ClusterInfo
from bodega.wire.transport.http import (
    RouteMaker,
    answer_response,
    json_response,
    query_int,
    read_model,
)


def platform_routes(r: RouteMaker, platform: Platform,
                    info: ClusterInfo | None = None) -> list[Route]:
    about = info or ClusterInfo()

    async def cluster(request: Request, who: Principal) -> Response:
        return json_response(platform.about(about).model_dump(mode="json"))

    async def placements(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.PlacementsRequest)
        if body.app is not None:
            who.check(body.app)
        return answer_response(platform.placements(body))

    async def regions(request: Request, who: Principal) -> Response:
        q = request.query_params
        try:
            if q.get("size"):
                kind, cpus, memory = preset(q["size"])
                guest: Guest | None = Guest(cpu_kind=kind, cpus=cpus, memory_mb=memory)
            elif q.get("cpus") or q.get("memory_mb"):
                guest = Guest(cpu_kind=q.get("cpu_kind", "shared"),
                              cpus=query_int(request, "cpus", 1),
                              memory_mb=query_int(request, "memory_mb", 256))
            else:
                guest = None
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: {exc}") from None
        return answer_response(platform.regions(ask_for(guest)))

    async def members(request: Request, who: Principal) -> Response:
        who.check_admin("cluster members")
        return answer_response(platform.members())

    async def workers(request: Request, who: Principal) -> Response:
        who.check_admin("cluster workers")
        return answer_response(platform.workers())

    return [
        r("/v1/platform/placements", placements, "POST"),
        r("/v1/platform/regions", regions, "GET"),
        r("/v1/cluster", cluster, "GET", gated=False),
        r("/v1/cluster/members", members, "GET", gated=False),
        r("/v1/cluster/workers", workers, "GET", gated=False),
        *host_routes(r, Hosts(platform)),  # hosts and their drain cordon
    ]
