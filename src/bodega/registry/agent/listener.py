"""What a registry agent's internal listener serves beside the registry's sync routes.

The agent is a component like a worker or a proxy, and its listener answers
as theirs do: ``GET /v1/health`` to any member of the cluster (who answers,
and nothing more), ``GET /metrics`` to the operator (its gossip counters, the
bad packets it dropped, the calls its listener refused). Each route is
behind its rule in the access table (listener ``agent-internal``), so a
stranger is refused in the handshake and a role the rule leaves out gets a
403, counted.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.core.access import AGENT_INTERNAL
from bodega.wire.transport.http import json_response
from bodega.wire.transport.peer_access import PeerAccess


class AgentHealth(BaseModel):
    """Who answers: as a worker's health says, no more (members, rows, peers stay private)."""
    model_config = ConfigDict(extra="forbid")
    ok: bool
    name: str
    region: str


def agent_routes(name: str, region: str, metrics: CollectorRegistry,
                 tls: InternalTls | None) -> list[BaseRoute]:
    """Health and metrics, for the agent's internal listener."""
    access = PeerAccess(AGENT_INTERNAL, tls)
    health = AgentHealth(ok=True, name=name, region=region).model_dump()

    async def answer_health(request: Request) -> Response:
        return json_response(health)

    async def answer_metrics(request: Request) -> Response:
        return Response(generate_latest(metrics), media_type="text/plain; version=0.0.4")

    return [access.route("/v1/health", answer_health, "GET"),
            access.route("/metrics", answer_metrics, "GET")]
