"""A registry agent in mutual TLS is a member like any other: it publishes its certificate's
expiry, says who it is to any member, and shows the operator its counters.

A real ``RegistryAgent`` (its listeners on loopback, its certificate from the test CA),
asked over real TLS connections.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from bodega.registry.agent.daemon import AgentConfig, RegistryAgent
from bodega.registry.agent.member_tls import EXPIRES, certificate_meta
from bodega.registry.node import RegistryConfig
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.files import TlsDir
from tests.integration.registry.node_kit import FAST
from tests.keyring_kit import KEYRING
from tests.tls_kit import TEST_CA


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[RegistryAgent]:
    metrics = CollectorRegistry()  # as `bodega agent` makes it: its listener's refusals too
    tls = InternalTls(TlsDir(TEST_CA.issue(tmp_path / "agent" / "tls", "agent", "agent")),
                      metrics)
    running = RegistryAgent(AgentConfig(RegistryConfig(
        name="agent", role="agent", region="ams", data_dir=tmp_path / "agent",
        keyring=KEYRING, swim=FAST)), tls, metrics)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


async def test_the_agent_publishes_when_its_certificate_expires(agent: RegistryAgent) -> None:
    assert agent.node is not None
    (me,) = [m for m in agent.node.members() if m.name == "agent"]
    assert me.meta[EXPIRES] == certificate_meta(agent.tls)[EXPIRES]


async def test_health_to_members_metrics_to_the_operator_and_strangers_counted(
        agent: RegistryAgent) -> None:
    async with httpx.AsyncClient(verify=TEST_CA.context("worker", "w1"), timeout=30) as http:
        health = await http.get(f"{agent.url}/v1/health")
        assert health.json() == {"ok": True, "name": "agent", "region": "ams"}
        refused = await http.get(f"{agent.url}/metrics")
        assert refused.status_code == 403, refused.text
    with pytest.raises(httpx.TransportError):  # no certificate: refused in the handshake
        async with httpx.AsyncClient(verify=TEST_CA.anonymous(), timeout=30) as http:
            await http.get(f"{agent.url}/v1/health")
    async with httpx.AsyncClient(verify=TEST_CA.context("admin"), timeout=30) as http:
        metrics = await http.get(f"{agent.url}/metrics")
    assert metrics.status_code == 200, metrics.text
    assert 'bodega_internal_refused_total{reason="role"} 1.0' in metrics.text
    assert 'bodega_internal_refused_total{reason="no certificate"} 1.0' in metrics.text
    assert "bodega_swim_" in metrics.text  # its gossip's and its replica's own
    assert "bodega_registry_" in metrics.text
