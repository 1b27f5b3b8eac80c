"""The registry agent's health and metrics: who answers to any member, counters to the operator."""

from __future__ import annotations

from pathlib import Path

import httpx
from cryptography.hazmat.primitives.serialization import Encoding
from prometheus_client import CollectorRegistry, Counter
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from bodega.registry.agent.listener import agent_routes
from bodega.runtime.tls.contexts import InternalTls, Peer
from bodega.runtime.tls.core.access import ADMIN, AGENT, BROKER, PROXY, WORKER
from bodega.runtime.tls.files import TlsDir
from bodega.runtime.tls.gate import PEER
from tests.tls_kit import TEST_CA


def calling_as(app: ASGIApp, tls: InternalTls, role: str) -> httpx.AsyncClient:
    """A client whose every request carries a verified certificate of ``role``, as the TLS
    gate leaves it in the scope after the handshake."""
    _, certificate = TlsDir(TEST_CA.identity_file(role, "caller").parent).read_identity()
    peer: Peer = tls.peer(certificate.public_bytes(Encoding.DER))

    async def gated(scope: Scope, receive: Receive, send: Send) -> None:
        scope["state"] = {PEER: peer}
        await app(scope, receive, send)

    return httpx.AsyncClient(transport=httpx.ASGITransport(app=gated), base_url="https://agent")


def agent_app(tmp_path: Path) -> tuple[Starlette, InternalTls, CollectorRegistry]:
    metrics = CollectorRegistry()
    Counter("bodega_gossip_probe", "a counter of the agent's", registry=metrics).inc()
    tls = InternalTls(TlsDir(TEST_CA.issue(tmp_path / "tls", "agent", "agent")), metrics)
    return Starlette(routes=agent_routes("agent", "ams", metrics, tls)), tls, metrics


async def test_health_says_who_answers_to_every_member_and_no_more(tmp_path: Path) -> None:
    app, tls, _ = agent_app(tmp_path)
    for role in (WORKER, BROKER, PROXY, AGENT, ADMIN):
        async with calling_as(app, tls, role) as http:
            answer = await http.get("/v1/health")
        assert answer.status_code == 200, (role, answer.text)
        assert answer.json() == {"ok": True, "name": "agent", "region": "ams"}


async def test_metrics_are_the_operators_and_other_roles_get_a_counted_403(
        tmp_path: Path) -> None:
    app, tls, metrics = agent_app(tmp_path)
    async with calling_as(app, tls, ADMIN) as http:
        answer = await http.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert "bodega_gossip_probe_total 1.0" in answer.text
    for role in (WORKER, BROKER, PROXY, AGENT):
        async with calling_as(app, tls, role) as http:
            refused = await http.get("/metrics")
        assert refused.status_code == 403, (role, refused.text)
        assert refused.json()["status"] == "permission_denied"
    assert metrics.get_sample_value("bodega_internal_refused_total", {"reason": "role"}) == 4
