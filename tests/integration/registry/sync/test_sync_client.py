"""A pull that does not complete is one ``SyncFailed`` saying why, whatever went wrong:
a refused connection, an error answer, a peer that stops answering, a reply too large."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from bodega.registry.replication.core.exchange import DigestRequest
from bodega.registry.sync import client as sync_client
from bodega.registry.sync.client import SyncClient, SyncFailed
from tests.ports_kit import free_port

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    await reader.readexactly(length)


@pytest.fixture
async def peer() -> AsyncIterator[Callable[[Answer], Awaitable[str]]]:
    servers: list[asyncio.Server] = []

    async def serving(answer: Answer) -> str:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await read_request(reader)
                await answer(reader, writer)
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield serving
    for server in servers:
        server.close()


async def compare(url: str, *, timeout: float = 5.0) -> str:
    client = SyncClient(None, timeout=timeout)
    try:
        with pytest.raises(SyncFailed) as failed:
            await client.compare(url, DigestRequest("me", ()))
    finally:
        await client.aclose()
    return str(failed.value)


async def test_an_error_answer_is_a_failure_with_its_status_and_body(
        peer: Callable[[Answer], Awaitable[str]]) -> None:
    async def refuse(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 8\r\n\r\nstopping")
        await writer.drain()

    url = await peer(refuse)
    assert await compare(url) == f"{url}: HTTP 503: stopping"


async def test_a_refused_connection_is_a_failure() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # no listener there
    assert (await compare(url)).startswith(f"{url}: ClientConnectorError")


async def test_a_peer_that_stops_answering_is_a_failure_after_the_timeout(
        peer: Callable[[Answer], Awaitable[str]]) -> None:
    async def hang(reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up and closes

    url = await peer(hang)
    failed = await asyncio.wait_for(compare(url, timeout=0.2), 5)
    assert failed.startswith(f"{url}: SocketTimeoutError")


async def test_a_reply_announced_over_the_limit_is_refused_unread(
        peer: Callable[[Answer], Awaitable[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync_client, "MAX_REPLY", 1000)

    async def flood(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n" + b"x" * 100)
        await writer.drain()

    url = await peer(flood)
    assert await compare(url) == f"{url}: reply over 1000 bytes"
