"""A response's head and body reach the client in one segment.

uvicorn writes a response's head and its body apart; ``bodega.runtime.serve`` hands its
protocol a transport that joins what it writes in one turn of the loop. A real server on
loopback, and a client that counts the data segments its socket received (``TCP_INFO``'s
``tcpi_data_segs_in``): one per response, not two. A body too large to be held goes as it
is, after its head. A connection upgraded to a WebSocket writes as it comes: its frames,
its close and its end of stream arrive in order.
"""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
import websockets
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from bodega.runtime.serve import serve

# struct tcp_info (linux/tcp.h): tcpi_data_segs_in, a __u32 after the fields before it.
DATA_SEGS_IN = 152
LARGE = 200_000


def data_segments_in(sock: socket.socket) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return int(struct.unpack_from("I", info, DATA_SEGS_IN)[0])


def exchange(sock: socket.socket, path: str) -> bytes:
    """One request; its whole answer (the body's length from its head)."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        body += sock.recv(65536)
    return head.split(b"\r\n")[0] + b" " + body[:5]


async def test_a_response_s_head_and_body_come_in_one_segment() -> None:
    async def small(_: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    async def large(_: Request) -> Response:
        return Response(b"x" * LARGE)

    served = await serve(Starlette(routes=[Route("/", small), Route("/large", large)]),
                         "127.0.0.1", 0)
    loop = asyncio.get_running_loop()
    try:
        sock = socket.create_connection(("127.0.0.1", served.port))
        try:
            assert await loop.run_in_executor(None, exchange, sock, "/") == \
                b"HTTP/1.1 200 OK hello"
            before = data_segments_in(sock)
            for _ in range(10):
                await loop.run_in_executor(None, exchange, sock, "/")
            assert data_segments_in(sock) - before == 10
            assert await loop.run_in_executor(None, exchange, sock, "/large") == \
                b"HTTP/1.1 200 OK xxxxx"
        finally:
            sock.close()
    finally:
        await served.stop()


async def test_a_websocket_s_frames_and_close_arrive_in_order() -> None:
    async def talk(socket: WebSocket) -> None:
        await socket.accept()
        for n in range(3):
            await socket.send_text(f"frame {n}")
        await socket.close(code=4001, reason="done")

    served = await serve(Starlette(routes=[WebSocketRoute("/ws", talk)]), "127.0.0.1", 0)
    try:
        async with websockets.connect(f"ws://127.0.0.1:{served.port}/ws") as client:
            got = [await client.recv() for _ in range(3)]
            with pytest.raises(websockets.ConnectionClosedError) as closed:
                await client.recv()
        assert got == ["frame 0", "frame 1", "frame 2"]
        received = closed.value.rcvd
        assert received is not None
        assert (received.code, received.reason) == (4001, "done")
    finally:
        await served.stop()
