"""The command line's transport (StreamHttp) against real sockets: what a server receives,
how bodies come back, which connections are kept and reused, TLS, and a kept connection
the server closed meanwhile."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bodega.model.errors import Indeterminate, NotFound, Unreachable
from bodega.runtime.tls.contexts import server_context
from bodega.runtime.tls.files import TlsDir
from bodega.wire.transport.json_client import JsonClient
from bodega.wire.transport.seam import Call, lines
from bodega.wire.transport.stream_http import StreamHttp
from tests.tls_kit import TEST_CA, ClusterCa

Reply = Callable[[bytes], bytes]  # a request's head and body -> the bytes answered


@dataclass
class Server:
    """An HTTP/1.1 server on loopback answering each request with ``reply``; it counts
    connections and keeps what it received."""

    reply: Reply
    close_after: int = 0  # answers per connection before closing it (0: never closes)
    hang_up_after: int = 0  # answers per connection before hanging up on the next request
    connections: int = 0
    received: list[bytes] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def start(self, tls: Path | None = None) -> Server:
        context = None
        if tls is not None:
            context = server_context(TEST_CA.ca_pem)
            context.load_cert_chain(TlsDir(tls).identity_path)
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=context)
        return self

    def url(self, scheme: str = "http") -> str:
        assert self.server is not None
        return f"{scheme}://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        answered = 0
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                self.received.append(request)
                if answered == self.hang_up_after > 0:
                    break
                writer.write(self.reply(request))
                await writer.drain()
                answered += 1
                if answered == self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def ok(body: bytes = b'{"ok":true}', *, status: str = "200 OK", more: bytes = b"") -> Reply:
    return lambda _request: (b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: application/json"
                             b"\r\nContent-Length: %d\r\n" % len(body) + more + b"\r\n" + body)


@pytest.fixture
async def serving() -> AsyncIterator[Callable[..., Awaitable[Server]]]:
    started: list[Server] = []

    async def start(reply: Reply, close_after: int = 0, tls: Path | None = None,
                    hang_up_after: int = 0) -> Server:
        server = await Server(reply, close_after, hang_up_after).start(tls)
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop()


async def test_a_call_reaches_the_server_as_sent(
        serving: Callable[..., Awaitable[Server]]) -> None:
    server = await serving(ok())
    async with JsonClient(server.url(), "tok", transport=StreamHttp()) as client:
        answer = await client.request("POST", "/v1/apps/web/machines/m 1/metadata/a%2Fb",
                                      json={"value": "ü"}, params={"force": True, "q": "a b&c"},
                                      nonce="n1")
    assert answer == {"ok": True}
    head, _, body = server.received[0].partition(b"\r\n\r\n")
    lines_ = head.decode().split("\r\n")
    assert lines_[0] == "POST /v1/apps/web/machines/m%201/metadata/a%2Fb?force=true&q=a%20b%26c " \
                        "HTTP/1.1"
    headers = dict(line.lower().split(": ", 1) for line in lines_[1:])
    assert headers["host"] == server.url().removeprefix("http://")
    assert headers["authorization"] == "bearer tok"
    assert headers["fly-machine-lease-nonce"] == "n1"
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"value": "ü"}
    assert int(headers["content-length"]) == len(body)


async def test_calls_one_after_another_share_one_kept_connection(
        serving: Callable[..., Awaitable[Server]]) -> None:
    server = await serving(ok())
    async with JsonClient(server.url(), None, transport=StreamHttp()) as client:
        for _ in range(5):
            assert await client.request("GET", "/v1/apps") == {"ok": True}
        # At once, they take connections of their own; done, those are kept too.
        await asyncio.gather(*(client.request("GET", "/v1/apps") for _ in range(3)))
        await client.request("GET", "/v1/apps")
    assert server.connections == 3


async def test_a_chunked_body_is_read_whole_and_streamed_line_by_line(
        serving: Callable[..., Awaitable[Server]]) -> None:
    records = [json.dumps({"n": n, "pad": "x" * 70_000}).encode() + b"\n" for n in range(3)]
    stream = b"".join(records)
    cut = [stream[i:i + 50_000] for i in range(0, len(stream), 50_000)]
    chunked = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(c), c) for c in cut) + b"0\r\nX-T: 1\r\n\r\n"
    server = await serving(lambda _r: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                           + chunked)
    transport = StreamHttp()
    try:
        call = Call("GET", server.url() + "/v1/apps/web/logs")
        assert (await transport.send(call)).body == stream
        async with transport.stream(call) as answer:
            assert answer.status == 200
            assert [json.loads(line)["n"] async for line in lines(answer.chunks)] == [0, 1, 2]
        await transport.send(call)
    finally:
        await transport.aclose()
    assert server.connections == 1  # chunked to its end: the connection was kept each time


async def test_an_error_answer_is_the_error_it_names(
        serving: Callable[..., Awaitable[Server]]) -> None:
    server = await serving(ok(b'{"error":"app not found: web","status":"not_found"}',
                              status="404 Not Found"))
    async with JsonClient(server.url(), None, transport=StreamHttp()) as client:
        with pytest.raises(NotFound, match="app not found: web"):
            await client.request("GET", "/v1/apps/web")


async def test_a_body_ended_by_the_close_is_read_and_its_connection_not_kept(
        serving: Callable[..., Awaitable[Server]]) -> None:
    server = await serving(lambda _r: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n[1,2]",
                           close_after=1)
    async with JsonClient(server.url(), None, transport=StreamHttp()) as client:
        assert await client.request("GET", "/v1/apps") == [1, 2]
        assert await client.request("GET", "/v1/apps") == [1, 2]
    assert server.connections == 2


async def test_a_kept_connection_the_server_closed_is_not_reused(
        serving: Callable[..., Awaitable[Server]]) -> None:
    server = await serving(ok(), close_after=1)  # closes each connection after one answer
    async with JsonClient(server.url(), None, transport=StreamHttp()) as client:
        await client.request("POST", "/v1/apps")
        await asyncio.sleep(0.05)  # the server's close arrives while the connection is kept
        assert await client.request("POST", "/v1/apps") == {"ok": True}
    assert (server.connections, len(server.received)) == (2, 2)


@pytest.mark.parametrize(("method", "sent_again"), [("GET", True), ("POST", False)])
async def test_a_call_the_server_hangs_up_on_is_sent_again_only_if_idempotent(
        serving: Callable[..., Awaitable[Server]], method: str, sent_again: bool) -> None:
    # The server drops a kept connection as the second call arrives on it, unanswered, as
    # one closing an idle connection at that moment does.
    server = await serving(ok(), hang_up_after=1)
    async with JsonClient(server.url(), None, transport=StreamHttp()) as client:
        await client.request(method, "/v1/apps")
        if sent_again:
            assert await client.request(method, "/v1/apps") == {"ok": True}
        else:
            with pytest.raises(Indeterminate, match="closed a kept connection unanswered"):
                await client.request(method, "/v1/apps")
    assert len(server.received) == (3 if sent_again else 2)


async def test_a_body_that_stops_coming_is_indeterminate_at_the_timeout(
        serving: Callable[..., Awaitable[Server]]) -> None:
    server = await serving(lambda _r: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")
    async with JsonClient(server.url(), None, timeout=0.3, transport=StreamHttp()) as client:
        with pytest.raises(Indeterminate, match="did not answer: TimeoutError"):
            await asyncio.wait_for(client.request("GET", "/v1/apps"), 5)


async def test_https_is_checked_against_the_context_given(
        serving: Callable[..., Awaitable[Server]], tmp_path: Path) -> None:
    server = await serving(ok(), tls=TEST_CA.issue(tmp_path / "tls", "broker", "b1"))
    url = server.url("https")
    async with JsonClient(url, None, transport=StreamHttp(TEST_CA.context())) as client:
        assert await client.request("GET", "/v1/apps") == {"ok": True}
    other = ClusterCa.make(tmp_path / "other")
    async with JsonClient(url, None, transport=StreamHttp(other.context())) as client:
        with pytest.raises(Unreachable, match="its certificate is refused: "):
            await client.request("GET", "/v1/apps")
