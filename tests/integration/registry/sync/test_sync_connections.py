"""Anti-entropy keeps one connection per peer: a pull does not open a new one each time.

A node pulls from a random peer about once a second, so in a cluster of N nodes it
comes back to the same peer only every N seconds or so. Real HTTP servers on loopback
count the connections each accepts while one client compares digests with each of them
in turn, twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp.connector
import pytest

from bodega.registry.replication.core.exchange import DigestRequest
from bodega.registry.sync.client import SyncClient

REPLY = b'{"differ":[]}'


class Peer:
    """An HTTP/1.1 keep-alive server answering every request with an empty digest reply."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> Peer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(REPLY), REPLY))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def peers() -> AsyncIterator[list[Peer]]:
    started = [await Peer().start() for _ in range(24)]
    yield started
    for peer in started:
        assert peer.server is not None
        peer.server.close()


class Later:
    """The connection pool's clock, moved forward: a peer revisited ``offset`` seconds
    later."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


async def test_a_node_reuses_its_connection_to_each_of_24_peers(peers: list[Peer]) -> None:
    client = SyncClient(None)
    try:
        for _ in range(2):
            for peer in peers:
                assert (await client.compare(peer.url, DigestRequest("me", ()))).differ == ()
        assert [peer.connections for peer in peers] == [1] * len(peers)
    finally:
        await client.aclose()


async def test_a_peer_pulled_from_again_30_s_later_answers_on_the_same_connection(
        peers: list[Peer], monkeypatch: pytest.MonkeyPatch) -> None:
    later = Later()
    monkeypatch.setattr(aiohttp.connector, "monotonic", later.monotonic)
    client = SyncClient(None)
    try:
        await client.compare(peers[0].url, DigestRequest("me", ()))
        later.offset = 30.0  # about when a node of a 30-node cluster comes back to it
        await client.compare(peers[0].url, DigestRequest("me", ()))
        assert peers[0].connections == 1
    finally:
        await client.aclose()
