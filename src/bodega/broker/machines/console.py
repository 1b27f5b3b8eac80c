"""``GET /v1/apps/{app}/machines/{id}/console``: a terminal in a machine, as a WebSocket.

``bodega ssh console`` opens one. The broker checks the caller as every route does
(the server's ``_socket_route``: token, app, readiness), the query (a bad ``rows``,
``cols`` or ``command`` 400) and the machine (404), then opens the same WebSocket to
the machine's worker (mutual TLS, this broker's certificate), which starts the
program on a terminal before it accepts. Only once the worker accepted does the
broker accept the caller's upgrade, so every refusal (a machine not started or a vm
machine, 412; the worker not reachable, 503) is an HTTP answer in the error shape.
Then every message is carried on as it came, binary (the terminal's bytes) and text
(a resize, the exit code: ``model/console.py``), until either side closes
(``wire/transport/console_relay.py``). A plain GET of the path is answered 400, saying what
it needs.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.websockets import WebSocket

from bodega.broker.auth.tokens import Principal
from bodega.broker.machines.forward import WORKER_OPEN_TIMEOUT, SocketRouteMaker, worker_socket
from bodega.broker.machines.service import Machines
from bodega.model.console import console_command, terminal_size
from bodega.wire.transport.console_relay import relay_messages
from bodega.wire.transport.forward_link import LinkEnd, open_link
from bodega.wire.transport.forward_serve import SocketEnd, accepted
from bodega.wire.transport.http import RouteMaker, websocket_only

CONSOLE = "/v1/apps/{app}/machines/{id}/console"


def console_routes(r: RouteMaker, s: SocketRouteMaker, machines: Machines
                   ) -> tuple[list[BaseRoute], list[BaseRoute]]:
    """(the plain GET's route, checked as every route and answering what the route needs;
    the WebSocket's route)."""

    async def plain(request: Request, who: Principal) -> Response:
        return await websocket_only(request)

    async def console(socket: WebSocket, who: Principal) -> None:
        app, machine_id = socket.path_params["app"], socket.path_params["id"]
        command = console_command(socket.query_params.getlist("command"))
        size = terminal_size(socket.query_params.get("rows"), socket.query_params.get("cols"))
        worker, url = await worker_socket(machines, app, machine_id, "console", [
            ("app", app), ("rows", str(size.rows)), ("cols", str(size.cols)),
            *(("command", part) for part in command)])
        async with open_link(url, what=f"worker {worker}", tls=machines.workers.tls,
                             timeout=WORKER_OPEN_TIMEOUT) as link:
            if await accepted(socket):
                await relay_messages(SocketEnd(socket, "the client"),
                                     LinkEnd(link, f"worker {worker}"))

    return [r(CONSOLE, plain, "GET")], [s(CONSOLE, console)]
