"""With HAProxy carrying the traffic, machine load comes from its counters (``show stat``).

A WebSocket-style upgrade held open through HAProxy is one request in flight
at its machine for as long as it lasts: bodega's proxy never sees it, yet
autostop must not stop that machine, and a machine past its soft limit must
get a second one started beside it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bodega.proxy.autostop import Autostop
from bodega.proxy.core.load import Load
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.haproxy.observed import CombinedLoad
from bodega.proxy.http1 import read_head
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.wake import Waker
from bodega.runtime.serve import serve
from bodega.wire.internal.worker_client import WorkerClient

from .plane_kit import serving
from .test_forwarding import Machine, machine_doc, routed


def limited(mid: str, port: int, state: str = "started") -> dict[str, Any]:
    doc = machine_doc(mid, port, state=state)
    service = doc["config"]["services"][0]
    service.update(concurrency={"soft_limit": 1}, autostop="stop")
    return doc


async def held_upgrade(url: str) -> asyncio.StreamWriter:
    """An upgraded connection through the proxy, left open."""
    reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
    writer.write(b"GET /ws HTTP/1.1\r\nHost: web.localhost\r\nConnection: Upgrade\r\n"
                 b"Upgrade: echo\r\n\r\n")
    head = await read_head(reader)
    assert head is not None
    assert head.status == 101
    return writer


async def test_haproxy_counters_drive_autostop_and_the_soft_limit() -> None:
    busy, spare = Machine("busy"), Machine("spare")
    busy_port = await busy.start()
    spare_port = await spare.start()  # up already: the stand-in worker only records asks
    calls: list[tuple[str, str]] = []

    async def start(request: Request) -> JSONResponse:
        calls.append(("start", request.path_params["id"]))
        return JSONResponse({"previous_state": "stopped", "migrated": False, "new_host": ""})

    async def stop(request: Request) -> JSONResponse:
        calls.append(("stop", request.path_params["id"]))
        return JSONResponse({"ok": True})

    worker_api = await serve(Starlette(routes=[
        Route("/v1/machines/{id}/start", start, methods=["POST"]),
        Route("/v1/machines/{id}/stop", stop, methods=["POST"])]), "127.0.0.1", 0)
    worker = WorkerClient(worker_api.url)
    table, load, metrics = RoutingTable(), Load(), ProxyMetrics()
    table.put_machine("m1", routed(limited("m1", busy_port)))
    table.put_machine("m2", routed(limited("m2", spare_port, state="stopped")))
    waker = Waker(table, lambda _w: worker, load, metrics, "ams")
    try:
        async with serving("haproxy", table, waker, load, metrics) as served:
            dataplane = served.dataplane
            assert dataplane is not None
            autostop = Autostop(table, CombinedLoad(load, dataplane.load), lambda _w: worker,
                                metrics, "ams", interval=3600, idle_for=0)
            writer = await held_upgrade(served.url)
            await dataplane.observe()
            assert dataplane.load.outstanding == {"m1": 1}
            # Past its soft limit (1): the stopped machine is started beside it.
            deadline = time.monotonic() + 30
            while ("start", "m2") not in calls:
                assert time.monotonic() < deadline, calls
                await asyncio.sleep(0.02)
            # m1 is busy as far as HAProxy knows: autostop leaves it be (m2 may go: idle).
            await autostop.tick()
            assert ("stop", "m1") not in calls
            writer.close()
            deadline = time.monotonic() + 30
            while dataplane.load.outstanding:
                assert time.monotonic() < deadline, dataplane.load.outstanding
                await asyncio.sleep(0.05)
                await dataplane.observe()
            table.put_machine("m2", None)  # leave m1 alone in the app
            await autostop.tick()  # and now that it is idle, it is stopped
            assert ("stop", "m1") in calls
    finally:
        await worker.aclose()
        await worker_api.stop()
        await busy.stop()
        await spare.stop()
        await asyncio.sleep(0.05)


async def test_a_cordoned_machines_requests_in_flight_are_counted_until_they_end() -> None:
    """A machine taken out of the rotation (cordoned, as an autoscaler draining it does)
    leaves its slot, but the session it holds there is still counted as its own, in
    the load autostop reads and in ``bodega_haproxy_server_current``, until it ends (the
    look that finds it ended says 0 once); only then is the slot free for another machine."""
    first, second = Machine("first"), Machine("second")
    ports = [await first.start(), await second.start()]
    table, load, metrics = RoutingTable(), Load(), ProxyMetrics()
    for mid, port in zip(("m1", "m2"), ports, strict=True):
        table.put_machine(mid, routed(machine_doc(mid, port)))
    waker = Waker(table, lambda _w: WorkerClient("http://127.0.0.1:9"), load, metrics, "ams")
    try:
        async with serving("haproxy", table, waker, load, metrics) as served:
            dataplane = served.dataplane
            assert dataplane is not None
            writers = [await held_upgrade(served.url) for _ in range(2)]  # one on each
            await dataplane.observe()
            assert dataplane.load.outstanding == {"m1": 1, "m2": 1}
            slot = next(key for key, (_, mid) in dataplane.layout.machines().items()
                        if mid == "m1")

            table.put_machine("m1", routed({**machine_doc("m1", ports[0]), "cordoned": True}))
            await dataplane.sync()
            assert slot not in dataplane.layout.machines()
            assert dataplane.layout.leaving == {slot: ("web", "m1")}
            await dataplane.observe()
            assert dataplane.load.outstanding == {"m1": 1, "m2": 1}
            assert ("web", "m1", 1, 0) in dataplane.collector.gauges

            for writer in writers:
                writer.close()
            deadline = time.monotonic() + 30
            while dataplane.layout.leaving or dataplane.load.outstanding:
                assert time.monotonic() < deadline, (dataplane.layout.leaving,
                                                     dataplane.load.outstanding)
                await asyncio.sleep(0.05)
                await dataplane.observe()
            assert ("web", "m1", 0, 0) in dataplane.collector.gauges  # the look that saw it end
            await dataplane.observe()
            assert ("web", "m1") not in {(a, m) for a, m, _, _ in dataplane.collector.gauges}
    finally:
        await first.stop()
        await second.stop()
        await asyncio.sleep(0.05)
