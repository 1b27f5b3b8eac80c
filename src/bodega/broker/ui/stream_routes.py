"""The event stream each page opens (``/ui/streams/...``), and a machine's live log tail.

A machine's log comes from the public logs API (``GET /v1/apps/{app}/logs``
with ``follow``, the visitor's token): its last lines, then each new one, sent
as ``log`` events the page appends. If the follow ends (the machine stopped,
its worker restarted) it is opened again a little later, without repeating
lines already sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from bodega.broker.ui.entry import Handler, fragment
from bodega.broker.ui.gatekeeper import Visitor
from bodega.broker.ui.pages import page_number
from bodega.broker.ui.parts import Parts
from bodega.broker.ui.stream import HEADERS, Event, Updater, sse
from bodega.broker.ui.updaters import (
    AppsUpdater,
    MachineUpdater,
    MembersUpdater,
    PlacementsUpdater,
    TopologyUpdater,
    WorkerUpdater,
)
from bodega.model.errors import BodegaError

LOG_TAIL = 100
LOG_RETRY = 2.0


def stream_routes(parts: Parts) -> list[Route]:
    def streaming(request: Request, visitor: Visitor, updater: Updater,
                  feeds: tuple[AsyncIterator[Event], ...] = (),
                  refusals: bool = False) -> Response:
        listen = parts.refusals.listen if refusals else None
        return StreamingResponse(sse(parts, request, visitor, updater, feeds, listen),
                                 media_type="text/event-stream", headers=HEADERS)

    async def topology(request: Request, visitor: Visitor) -> Response:
        updater = TopologyUpdater(parts, request.query_params.get("region", ""),
                                  page_number(request))
        return streaming(request, visitor, updater)

    async def worker(request: Request, visitor: Visitor) -> Response:
        return streaming(request, visitor, WorkerUpdater(parts, request.path_params["name"]))

    async def apps(request: Request, visitor: Visitor) -> Response:
        return streaming(request, visitor, AppsUpdater(parts, visitor))

    async def app(request: Request, visitor: Visitor) -> Response:
        name = request.path_params["app"]
        visitor.principal.check(name)
        return streaming(request, visitor, AppsUpdater(parts, visitor, name))

    async def machine(request: Request, visitor: Visitor) -> Response:
        app_name, machine_id = request.path_params["app"], request.path_params["machine"]
        visitor.principal.check(app_name)
        updater = MachineUpdater(parts, visitor, app_name, machine_id)
        return streaming(request, visitor, updater,
                         (log_tail(parts, visitor, app_name, machine_id),))

    async def placements(request: Request, visitor: Visitor) -> Response:
        return streaming(request, visitor, PlacementsUpdater(parts), refusals=True)

    async def members(request: Request, visitor: Visitor) -> Response:
        return streaming(request, visitor, MembersUpdater(parts))

    def get(path: str, handler: Handler, admin: bool = False) -> Route:
        return Route(path, fragment(parts, handler, admin=admin), methods=["GET"])

    return [
        get("/ui/streams/topology", topology, admin=True),
        get("/ui/streams/workers/{name}", worker, admin=True),
        get("/ui/streams/apps", apps),
        get("/ui/streams/apps/{app}", app),
        get("/ui/streams/apps/{app}/machines/{machine}", machine),
        get("/ui/streams/placements", placements, admin=True),
        get("/ui/streams/members", members, admin=True),
    ]


async def log_tail(parts: Parts, visitor: Visitor, app: str,
                   machine_id: str) -> AsyncIterator[Event]:
    last = ""  # the newest timestamp sent: a reopened follow skips what came before
    tail, reopened = LOG_TAIL, False
    while True:
        try:
            async for line in parts.api.of(visitor.token).follow_logs(app, machine_id, tail):
                if reopened and line.timestamp <= last:
                    continue
                reopened, last = False, line.timestamp
                yield "log", parts.templates.fragment("_log_line.html", line=line, note="")
        except (BodegaError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            yield "log", parts.templates.fragment("_log_line.html", line=None,
                                                  note=f"log unavailable: {exc}")
            await asyncio.sleep(LOG_RETRY * 5)
        tail, reopened = 1, True
        await asyncio.sleep(LOG_RETRY)
