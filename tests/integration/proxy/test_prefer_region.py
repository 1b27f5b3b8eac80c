"""Fly-Prefer-Region on both data planes: that region's machine when it has one, the nearest
machines when it has none."""

from __future__ import annotations

import httpx

from bodega.proxy.core.load import Load
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.wake import Waker

from .plane_kit import serving
from .test_forwarding import Machine, machine_doc, routed


async def test_fly_prefer_region_picks_that_regions_machine_else_the_nearest(plane: str) -> None:
    ams, syd = Machine("ams-1"), Machine("syd-1")
    table, load, metrics = RoutingTable(), Load(), ProxyMetrics()
    table.put_machine("ams-1", routed(machine_doc("ams-1", await ams.start(), region="ams")))
    table.put_machine("syd-1", routed(machine_doc("syd-1", await syd.start(), region="syd")))
    waker = Waker(table, lambda _w: None, load, metrics, "ams")
    try:
        async with serving(plane, table, waker, load, metrics) as served, \
                httpx.AsyncClient(base_url=served.url, timeout=10) as client:
            await served.synced()
            for region, expected in (("syd", "syd-1"), ("ams", "ams-1"), ("fra", "ams-1")):
                for _ in range(5):
                    answer = await client.get("/p", headers={"host": "web.localhost",
                                                             "fly-prefer-region": region})
                    assert answer.text.startswith(f"{expected} GET /p"), (region, answer.text)
    finally:
        await ams.stop()
        await syd.stop()
