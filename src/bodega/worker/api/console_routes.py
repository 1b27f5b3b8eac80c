"""The worker's end of a console: a WebSocket carried to a program on a pseudo-terminal.

``GET /v1/machines/{id}/console?app=APP&command=...&rows=R&cols=C`` (brokers only)
starts the command (none: the machine's shell) where an exec of the machine runs, on a
terminal of the worker's (``worker/ops/terminal.py``) or, in a vm machine, of its
guest's kernel (``drivers/vm/guest_console.py``), and only then accepts the upgrade, so
every refusal is an HTTP answer in the error shape before it: a bad query 400, a machine
of another app 404, one not started 412, a vm machine whose one console is open 409, or
whose VM does not answer yet 503. Then binary
frames carry the terminal's bytes both ways, and a text frame from the broker resizes
the terminal (``model/console.py``). When the program ends, what it printed last is
sent, then ``{"exit": CODE}``, and the socket is closed; when the socket closes first,
the terminal is hung up and the program reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from starlette.websockets import WebSocket, WebSocketDisconnect

from bodega.model.console import ServerControl, client_control, console_command, terminal_size
from bodega.model.errors import BodegaError
from bodega.model.forwarding import UNSUPPORTED, clip_reason
from bodega.wire.transport.forward_serve import accepted
from bodega.worker.api.machine_routes import find_machine
from bodega.worker.drivers.base import ConsoleSession
from bodega.worker.ops.actions import MachineActions
from bodega.worker.ops.machines import MachineService

CONSOLE = "/v1/machines/{id}/console"
DRAIN_TIMEOUT = 5.0  # seconds to read what an ended program printed last (a child may hold on)

SocketSpec = tuple[str, Callable[[WebSocket], Awaitable[None]]]


class ConsoleRoutes:
    def __init__(self, *, machines: MachineService, actions: MachineActions) -> None:
        self.machines = machines
        self.actions = actions

    def sockets(self) -> list[SocketSpec]:
        return [(CONSOLE, self.console)]

    async def console(self, socket: WebSocket) -> None:
        row = find_machine(self.machines, socket)
        command = console_command(socket.query_params.getlist("command"))
        size = terminal_size(socket.query_params.get("rows"), socket.query_params.get("cols"))
        async with self.actions.console(row.id, command, size) as terminal:
            if await accepted(socket):
                await converse(socket, terminal)


async def converse(socket: WebSocket, terminal: ConsoleSession) -> None:
    """Carry the terminal's bytes both ways until the program ends (then say its exit code
    and close) or the socket closes."""

    async def output() -> None:
        while data := await terminal.read():
            await socket.send_bytes(data)

    async def typed() -> None:
        while True:
            message = await socket.receive()
            if message["type"] == "websocket.disconnect":
                return
            data, text = message.get("bytes"), message.get("text")
            if data is not None:
                await terminal.write(data)
            elif text is not None:
                try:
                    terminal.resize(client_control(text).resize)
                except BodegaError as err:
                    with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):
                        await socket.close(UNSUPPORTED, clip_reason(err.message))
                    return

    printed = asyncio.create_task(output())
    reading = asyncio.create_task(typed())
    ended = asyncio.create_task(terminal.exit_code())
    try:
        done, _ = await asyncio.wait({reading, ended}, return_when=asyncio.FIRST_COMPLETED)
        if ended in done:
            await asyncio.wait({printed}, timeout=DRAIN_TIMEOUT)
            with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):
                await socket.send_text(ServerControl(exit=ended.result()).model_dump_json())
                await socket.close(1000)
    finally:
        for task in (printed, reading, ended):
            task.cancel()
        await asyncio.gather(printed, reading, ended, return_exceptions=True)
