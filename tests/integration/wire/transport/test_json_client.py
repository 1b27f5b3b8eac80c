"""The service client tells "never reached the server" from "sent, but no answer came back",
on either transport: the daemons' aiohttp sessions and the command line's StreamHttp."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest

from bodega.model.errors import Indeterminate, Unavailable, Unreachable
from bodega.wire.transport import json_client
from bodega.wire.transport.json_client import JsonClient
from bodega.wire.transport.seam import Transport
from bodega.wire.transport.stream_http import StreamHttp

Client = Callable[..., JsonClient]


@pytest.fixture(params=["aiohttp", "stream"])
def client(request: pytest.FixtureRequest) -> Client:
    def made(url: str, token: str, *, timeout: float) -> JsonClient:
        transport: Transport | None = StreamHttp() if request.param == "stream" else None
        return JsonClient(url, token, timeout=timeout, transport=transport)

    return made


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_refused_connection_is_unavailable_and_not_indeterminate(client: Client) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    async with client(url, "t", timeout=2) as api:
        with pytest.raises(Unreachable) as caught:
            await api.request("GET", "/v1/health")
    assert not isinstance(caught.value, Indeterminate)
    # In words a person reads: no library repr (it named an SSL setting for plain HTTP).
    assert caught.value.message == f"server at {url} unreachable (connection refused)"
    assert (caught.value.url, caught.value.reason) == (url, "connection refused")


async def test_a_connection_that_never_opens_is_unavailable(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    # A listener that never accepts, its queue already full: the kernel drops further SYNs,
    # as a host that is down does; the server cannot have seen a request.
    monkeypatch.setattr(json_client, "CONNECT_TIMEOUT", 0.3)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        await asyncio.sleep(0.1)
        try:
            async with client(f"http://127.0.0.1:{port}", "t", timeout=5) as api:
                with pytest.raises(Unavailable, match="unreachable") as caught:
                    await api.request("POST", "/v1/machines", json={"app": "a"})
            assert not isinstance(caught.value, Indeterminate)
        finally:
            for filler in fillers:
                filler.close()


@pytest.mark.parametrize("answer", ["never", "hang up"])
async def test_a_request_without_an_answer_is_indeterminate(client: Client, answer: str) -> None:
    received, done = asyncio.Event(), asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        received.set()
        if answer == "never":
            await done.wait()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with client(f"http://127.0.0.1:{port}", "t", timeout=0.5) as api:
            with pytest.raises(Indeterminate, match="did not answer"):
                await api.request("POST", "/v1/machines", json={"app": "a"})
        assert received.is_set()  # the server had the request: it may have acted on it
    finally:
        done.set()
        server.close()
        await server.wait_closed()
