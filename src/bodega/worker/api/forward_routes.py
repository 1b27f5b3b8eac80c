"""The worker's end of a port forward: a WebSocket carried to a TCP port of one machine.

``GET /v1/machines/{id}/forward?port=N&app=APP`` (brokers only) connects to the
machine's port at the address its host reaches it by (the one the proxy and the
health checks use: ``service_host``), and only then accepts the upgrade, so every
refusal is an HTTP answer in the error shape before it: a bad port 400, a machine
of another app 404, one not started 412, a connection refused or not made 503. Then
the relay (``wire/transport/forward_link.py``) carries bytes both ways until either side closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.websockets import WebSocket

from bodega.model.errors import PreconditionFailed, Unavailable
from bodega.model.forwarding import port_number
from bodega.model.states import MachineState
from bodega.runtime.waits import within
from bodega.wire.transport.forward_link import StreamEnd, relay, why
from bodega.wire.transport.forward_serve import SocketEnd, accepted
from bodega.worker.api.machine_routes import find_machine
from bodega.worker.core.records import MachineRow
from bodega.worker.ops.machines import MachineService

FORWARD = "/v1/machines/{id}/forward"
CONNECT_TIMEOUT = 5.0  # seconds to connect to the machine's port, on its own host

SocketSpec = tuple[str, Callable[[WebSocket], Awaitable[None]]]


class ForwardRoutes:
    def __init__(self, *, machines: MachineService,
                 service_host: Callable[[MachineRow], str | None],
                 connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.machines = machines
        self.service_host = service_host
        self.connect_timeout = connect_timeout

    def sockets(self) -> list[SocketSpec]:
        return [(FORWARD, self.forward)]

    async def forward(self, socket: WebSocket) -> None:
        port = port_number(socket.query_params.get("port"))
        row = find_machine(self.machines, socket)
        if row.state != MachineState.STARTED:
            raise PreconditionFailed(f"failed_precondition: machine {row.id} is {row.state}, "
                                     "not started: start it to forward a port to it")
        host = self.service_host(row) or row.private_ip or "127.0.0.1"
        where = f"machine {row.id} port {port}"
        try:
            reader, writer = await within(asyncio.open_connection(host, port),
                                          self.connect_timeout)
        except TimeoutError:
            raise Unavailable(f"unavailable: no connection to {where} in "
                              f"{self.connect_timeout:g}s") from None
        except OSError as exc:
            raise Unavailable(f"unavailable: no connection to {where}: {why(exc)}") from None
        try:
            if await accepted(socket):
                await relay(SocketEnd(socket, "the broker"),
                            StreamEnd(reader, writer, f"the connection to {where}"))
        finally:
            if not writer.is_closing():  # cancelled, or the broker gone: nothing is told
                writer.transport.abort()
