"""Every route an internal listener mounts has its rule in the access table, and every rule
names a route some listener mounts: nothing is open by omission, nothing stale is left."""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute

from bodega.proxy.daemon import Proxy, ProxyDaemonConfig
from bodega.registry import RegistryConfig
from bodega.registry.agent.daemon import AgentConfig, RegistryAgent
from bodega.runtime.serve import Served
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.core.access import (
    AGENT_INTERNAL,
    BROKER_INTERNAL,
    POLICY,
    PROXY_ADMIN,
    REGISTRY,
    WORKER_API,
)
from bodega.runtime.tls.core.access import Route as Rule
from bodega.runtime.tls.files import TlsDir
from bodega.wire.transport.routing import SegmentGroup
from tests.keyring_kit import KEYRING, SOURCE
from tests.tls_kit import TEST_CA

from .broker_kit import in_process_cluster


def mounted(served: Served, listener: str) -> set[Rule]:
    found = set()
    app = served.server.config.app
    assert isinstance(app, Starlette)
    for route in (r for g in app.routes for r in (
            g.routes if isinstance(g, SegmentGroup) else [g])):
        # A WebSocket's upgrade is a GET, and its rule is the GET's (a port forward's)
        assert isinstance(route, Route | WebSocketRoute)
        method, path = route.name.split(" ", 1)  # every guarded route is named so
        found.add(Rule(REGISTRY if path.startswith("/v1/registry/") else listener, method,
                       path))
    return found


async def test_the_access_table_and_the_mounted_routes_are_the_same(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        worker = await c.add_worker("ams-1")
        broker = await c.add_broker()
        proxy = Proxy(ProxyDaemonConfig(
            name="p1", region="ams", data_dir=tmp_path / "p1", gossip_keyring=SOURCE,
            tls_dir=TEST_CA.issue(tmp_path / "p1" / "tls", "proxy", "p1"), listen_port=0,
            data_plane="python"))
        agent = RegistryAgent(AgentConfig(RegistryConfig(
            name="agent", role="agent", region="ams", data_dir=tmp_path / "agent",
            keyring=KEYRING)), InternalTls(TlsDir(TEST_CA.issue(
                tmp_path / "agent" / "tls", "agent", "agent"))))
        await proxy.start()
        await agent.start()
        try:
            assert worker.served is not None
            assert broker.internal is not None
            assert proxy.admin is not None
            assert agent.internal is not None
            routes = (mounted(worker.served, WORKER_API) | mounted(broker.internal,
                                                                   BROKER_INTERNAL)
                      | mounted(proxy.admin, PROXY_ADMIN)
                      | mounted(agent.internal, AGENT_INTERNAL))
        finally:
            await agent.stop()
            await proxy.stop()
    assert sorted(map(str, routes - set(POLICY))) == []  # guarded without a rule: impossible
    assert sorted(map(str, set(POLICY) - routes)) == []  # a rule for nothing
