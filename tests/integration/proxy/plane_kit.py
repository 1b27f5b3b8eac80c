"""Serving a routing table on either data plane, for tests that must pass on both.

``python``: bodega's proxy takes client connections itself. ``haproxy``: a
real HAProxy takes them, kept in step with the table through its runtime API,
with bodega's proxy behind it as the activator. Without haproxy installed the
haproxy variant skips, unless ``BODEGA_REQUIRE_HAPROXY=1`` (``make test``
installs it and sets that), where it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from bodega.proxy.core.load import Load
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.core.statics import StaticsTable
from bodega.proxy.haproxy.dataplane import HaproxyDataPlane
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.plane import haproxy_settings
from bodega.proxy.server import ProxyConfig, ProxyServer
from bodega.proxy.upstream import Upstreams
from bodega.proxy.wake import Waker

PLANES = ("python", "haproxy")


def haproxy_binary() -> str:
    found = shutil.which("haproxy")
    if found:
        return found
    if os.environ.get("BODEGA_REQUIRE_HAPROXY") == "1":
        pytest.fail("BODEGA_REQUIRE_HAPROXY=1 but haproxy is not installed")
    pytest.skip("haproxy is not installed (BODEGA_REQUIRE_HAPROXY=1 makes this a failure)")


@dataclass
class Serving:
    url: str
    dataplane: HaproxyDataPlane | None

    async def synced(self) -> None:
        """The data plane has caught up with the routing table."""
        if self.dataplane is not None:
            await self.dataplane.sync()


@contextlib.asynccontextmanager
async def serving(plane: str, table: RoutingTable, waker: Waker, load: Load,
                  metrics: ProxyMetrics,
                  statics: StaticsTable | None = None) -> AsyncIterator[Serving]:
    binary = haproxy_binary() if plane == "haproxy" else None
    upstreams = Upstreams()
    server = ProxyServer(ProxyConfig("ams", behind_data_plane=binary is not None), table,
                         upstreams, waker, load, metrics, statics=statics)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    address = listener.sockets[0].getsockname()[:2]
    dataplane = None
    workdir = None
    try:
        if binary is None:
            yield Serving(f"http://{address[0]}:{address[1]}", None)
        else:
            workdir, settings = haproxy_settings("127.0.0.1", 0, address, "localhost", 1)
            dataplane = HaproxyDataPlane(binary, workdir, settings, table, "ams", waker,
                                         statics=statics)
            await dataplane.start()
            yield Serving(f"http://127.0.0.1:{settings.bind_port}", dataplane)
    finally:
        if dataplane is not None:
            await dataplane.stop()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        listener.close()
        upstreams.close()
