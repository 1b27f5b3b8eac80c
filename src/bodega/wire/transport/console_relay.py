"""A console's relay at the broker: every WebSocket message carried on as it came.

A console (``bodega ssh console``) sends a port forward's binary frames, the
terminal's bytes, and text frames too: the client's resizes, the worker's exit code
(``model/console.py``). The broker checks neither: it passes each message from the
client's socket to the worker's link and back, of the kind it came as, until either
side closes; then it closes the other as a forward's relay does (``closing``).
"""

from __future__ import annotations

from starlette.websockets import WebSocketDisconnect
from websockets.exceptions import ConnectionClosed

from bodega.model.forwarding import ABNORMAL, Finish, on_close
from bodega.wire.transport.forward_link import LinkEnd, first_finish
from bodega.wire.transport.forward_serve import SocketEnd


async def relay_messages(client: SocketEnd, far: LinkEnd) -> Finish:
    """Carry messages both ways between an accepted socket and a link until either closes,
    then close both; how the first side ended is the answer."""
    socket, link = client.socket, far.link

    async def up() -> Finish:
        while True:
            try:
                message = await socket.receive()
            except (RuntimeError, OSError):
                return on_close(ABNORMAL, peer=client.name)
            if message["type"] == "websocket.disconnect":
                return on_close(message.get("code"), message.get("reason") or "",
                                peer=client.name)
            data, text = message.get("bytes"), message.get("text")
            try:
                await link.send(data if data is not None else text or "")
            except ConnectionClosed as exc:
                return _closed(exc, far.name)

    async def down() -> Finish:
        while True:
            try:
                message = await link.recv()
            except ConnectionClosed as exc:
                return _closed(exc, far.name)
            try:
                await (socket.send_text(message) if isinstance(message, str)
                       else socket.send_bytes(bytes(message)))
            except WebSocketDisconnect as exc:
                return on_close(exc.code, exc.reason or "", peer=client.name)
            except (RuntimeError, OSError):
                return on_close(ABNORMAL, peer=client.name)

    return await first_finish(client, far, up(), down())


def _closed(exc: ConnectionClosed, peer: str) -> Finish:
    close = exc.rcvd
    return on_close(None if close is None else close.code,
                    "" if close is None else close.reason, peer=peer)


