"""A port forward's WebSocket as its server sees it: an accepted Starlette WebSocket as one
end of the relay (``wire/transport/forward_link.py``). The broker's forward route relays between
one of these (the CLI's) and a link to the machine's worker; the worker's between one
(the broker's) and the machine's TCP connection."""

from __future__ import annotations

import contextlib

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from bodega.model.forwarding import ABNORMAL, Finish, Frame, Step, closing, on_close, on_frame


async def accepted(socket: WebSocket) -> bool:
    """Accept the upgrade; False if the client is gone already (it gave up waiting while
    this side connected onwards): there is nothing to relay, and nothing to say."""
    try:
        await socket.accept()
    except OSError:  # uvicorn's ClientDisconnected
        return False
    return True


class SocketEnd:
    """An accepted WebSocket; ``name`` says who is at its far end."""

    def __init__(self, socket: WebSocket, name: str) -> None:
        self.socket = socket
        self.name = name

    async def read(self) -> Step:
        try:
            message = await self.socket.receive()
        except (RuntimeError, OSError):  # already told of the disconnect: it is gone
            return on_close(ABNORMAL, peer=self.name)
        if message["type"] == "websocket.disconnect":
            return on_close(message.get("code"), message.get("reason") or "", peer=self.name)
        data = message.get("bytes")
        if data is None:
            return on_frame(Frame.TEXT, peer=self.name)
        return on_frame(Frame.BYTES, data)

    async def write(self, data: bytes) -> Finish | None:
        try:
            await self.socket.send_bytes(data)
        except WebSocketDisconnect as exc:
            return on_close(exc.code, exc.reason or "", peer=self.name)
        except (RuntimeError, OSError):  # closed meanwhile (the other pump finished it)
            return on_close(ABNORMAL, peer=self.name)
        return None

    async def finish(self, how: Finish) -> None:
        if self.socket.application_state is not WebSocketState.CONNECTED:
            return
        code, reason = closing(how)
        with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):
            await self.socket.close(code, reason)
