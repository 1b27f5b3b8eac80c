"""``GET /v1/apps/{app}/machines/{id}/forward?port=N``: a TCP port of a machine, as a WebSocket.

``bodega port-forward`` opens one of these for each connection it accepts on the
user's host. The broker checks the caller as every route does (the route is made by
the server's ``_socket_route``: token, app, readiness), the port (400) and the machine
(404), then opens the same WebSocket to the machine's worker (mutual TLS, with this
broker's certificate), which connects to the machine's port before it accepts. Only
once the worker accepted does the broker accept the caller's upgrade: every refusal
on the way (a machine not started, 412; the port refusing the connection, 503; the
worker not reachable, 503) reaches the caller as an HTTP answer in the error shape,
before any byte is carried. Then the broker relays frames both ways
(``wire/transport/forward_link.py``) until either side closes. A plain GET of the same path
(no upgrade) is checked as any request and answered 400, saying what it needs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.websockets import WebSocket

from bodega.broker.auth.tokens import Principal
from bodega.broker.machines.service import Machines
from bodega.broker.view.core.host_status import GONE_HOSTS
from bodega.model.errors import Unavailable
from bodega.model.forwarding import port_number
from bodega.wire.internal.worker_client import machine_path
from bodega.wire.transport.forward_link import LinkEnd, open_link, relay, socket_url
from bodega.wire.transport.forward_serve import SocketEnd, accepted
from bodega.wire.transport.http import RouteMaker, websocket_only

FORWARD = "/v1/apps/{app}/machines/{id}/forward"
WORKER_OPEN_TIMEOUT = 15.0  # the worker's answer waits on its connection to the machine (5 s)

SocketHandler = Callable[[WebSocket, Principal], Awaitable[None]]
# The server's factory of authenticated WebSocket routes: (path, handler) -> route.
SocketRouteMaker = Callable[[str, SocketHandler], BaseRoute]


async def worker_socket(machines: Machines, app: str, machine_id: str, part: str,
                        query: list[tuple[str, str]]) -> tuple[str, str]:
    """(the machine's worker, the URL of its WebSocket route ``part`` with ``query``);
    Unavailable when that worker is gone or not in the view."""
    worker = await machines.locate(app, machine_id)
    status = machines.catalog.member_status(worker)
    if status in GONE_HOSTS:
        raise Unavailable(f"unavailable: machine {machine_id}'s worker {worker} is {status}")
    base = machines.workers.url_of(worker)
    if base is None:
        raise Unavailable(f"unavailable: worker {worker} is not in the cluster view")
    return worker, socket_url(base, machine_path(machine_id, part), query)


def forward_routes(r: RouteMaker, s: SocketRouteMaker, machines: Machines
                   ) -> tuple[list[BaseRoute], list[BaseRoute]]:
    """(the plain GET's route, checked as every route and answering what the route needs;
    the WebSocket's route)."""

    async def plain(request: Request, who: Principal) -> Response:
        return await websocket_only(request)

    async def forward(socket: WebSocket, who: Principal) -> None:
        app, machine_id = socket.path_params["app"], socket.path_params["id"]
        port = port_number(socket.query_params.get("port"))
        worker, url = await worker_socket(machines, app, machine_id, "forward",
                                          [("port", str(port)), ("app", app)])
        async with open_link(url, what=f"worker {worker}", tls=machines.workers.tls,
                             timeout=WORKER_OPEN_TIMEOUT) as link:
            if await accepted(socket):
                await relay(SocketEnd(socket, "the client"),
                            LinkEnd(link, f"worker {worker}"))

    return [r(FORWARD, plain, "GET")], [s(FORWARD, forward)]
