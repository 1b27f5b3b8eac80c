"""HAProxy keeps a machine's connections for the next client, and survives the machine closing one.

Clients that open a connection per request (TLS clients most of all, where each
one is a handshake) must not cost the machine a connection per request too: a
new client's first request goes on an idle connection the machine already has,
as nginx's upstream keep-alive does. A machine may close an idle connection at
the instant a request is sent on it (its own keep-alive timeout): a request
that may be sent twice is then sent again on a new connection; any other gets a
502 and reaches the machine once, never twice. A later request on a client's
keep-alive connection ends that connection with no answer instead, and the
client sends it again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx

from bodega.proxy.core.load import Load
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.http1 import read_head
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.wake import Waker

from .plane_kit import Serving, serving
from .test_forwarding import machine_doc, routed


@dataclass
class Counting:
    """An HTTP/1.1 machine that counts the connections it accepted and the requests it got.

    ``forgetful``: a second request on a connection is read and then the connection
    is closed with no answer, as a server does whose keep-alive ended as it came.
    """

    forgetful: bool = False
    accepted: int = 0
    got: list[str] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        served = 0
        try:
            while (head := await read_head(reader)) is not None:
                length = dict(head.headers).get(b"content-length", b"0")
                await reader.readexactly(int(length))
                self.got.append(head.method.decode())
                if self.forgetful and served:
                    break
                served += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


@contextlib.asynccontextmanager
async def behind_haproxy(machine: Counting) -> AsyncIterator[Serving]:
    table, load, metrics = RoutingTable(), Load(), ProxyMetrics()
    table.put_machine("m0", routed(machine_doc("m0", await machine.start())))
    waker = Waker(table, lambda _w: None, load, metrics, "ams")
    try:
        async with serving("haproxy", table, waker, load, metrics) as served:
            yield served
    finally:
        await machine.stop()


async def one_request(url: str, method: str = "GET") -> httpx.Response:
    """On a connection of its own, closed after it."""
    async with httpx.AsyncClient(base_url=url, headers={"host": "web.localhost"},
                                 timeout=30) as http:
        return await http.request(method, "/", content=b"x" if method == "POST" else None)


async def test_clients_with_a_connection_per_request_share_the_machines_connections() -> None:
    machine = Counting()
    async with behind_haproxy(machine) as served:
        answers = [await one_request(served.url) for _ in range(20)]
    assert [a.status_code for a in answers] == [200] * 20
    assert len(machine.got) == 20
    assert machine.accepted <= 2, f"20 clients cost the machine {machine.accepted} connections"


async def test_a_connection_the_machine_closed_under_a_request_is_retried_only_when_safe() -> None:
    machine = Counting(forgetful=True)
    async with behind_haproxy(machine) as served:
        assert (await one_request(served.url)).status_code == 200  # leaves an idle connection
        for method in ("GET", "HEAD", "PUT", "DELETE", "OPTIONS"):
            answer = await one_request(served.url, method)
            assert answer.status_code == 200, (method, answer.text)
        machine.got.clear()
        posted = await one_request(served.url, "POST")
        # The POST went on an idle connection that the machine closed: it is not sent again.
        assert posted.status_code == 502
        assert machine.got == ["POST"]
        # Nor is the machine marked down for it: the next request is served by it.
        assert (await one_request(served.url)).status_code == 200


async def test_a_later_request_a_reused_connection_was_closed_under_ends_the_clients_connection(
) -> None:
    """Not kept for a retry (``KEPT``): HAProxy ends the client's keep-alive connection with
    no answer, as after any keep-alive's end, and the client sends the request again."""
    machine = Counting(forgetful=True)
    async with behind_haproxy(machine) as served:
        host, port = served.url.removeprefix("http://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        request = b"GET / HTTP/1.1\r\nHost: web.localhost\r\n\r\n"
        try:
            writer.write(request)
            first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\nok"), 10)
            assert first.startswith(b"HTTP/1.1 200")
            writer.write(request)  # on the machine's same connection, which it closes
            assert await asyncio.wait_for(reader.read(), 10) == b""
        finally:
            writer.close()
        assert machine.got == ["GET", "GET"]  # the second one reached it once
        # The client's retry, on a connection of its own, is served.
        assert (await one_request(served.url)).status_code == 200
