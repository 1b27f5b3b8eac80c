"""A server that stops closes every connection, also one it accepted as it began to stop.

A real uvicorn server (``bodega.runtime.serve``) on loopback, plain and TLS,
and a client that connects at each of the loop's turns around the stop: the
connection waits in the listener's queue, is accepted and waits for its
handshake, or its handshake is done after the server told its connections to
close. Whichever, the client is answered and the connection closed, or it is
refused (reset): never left open, and never a request run unanswered. A
client that keeps its answered connection open and reads nothing more (an idle
connection in a pool) does not hold the stop for its grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from bodega.runtime.serve import serve
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.files import TlsDir
from bodega.runtime.waits import within
from tests.tls_kit import TEST_CA


def counting_app(calls: list[None]) -> Starlette:
    async def hello(_: Request) -> PlainTextResponse:
        calls.append(None)
        return PlainTextResponse("hello")

    return Starlette(routes=[Route("/", hello)])


def unchecked() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def one_request(port: int, tls: ssl.SSLContext | None) -> str:
    """What the client met: an answer and then the end, the end alone, or a refusal."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
    except (ConnectionError, ssl.SSLError):
        return "refused"
    try:
        writer.write(b"GET / HTTP/1.1\r\nhost: here\r\n\r\n")
        await writer.drain()
        got = await reader.read()  # to the end: the server closes the connection
    except (ConnectionError, ssl.SSLError):
        return "refused"
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()
    return "answered, then closed" if got.startswith(b"HTTP/1.1 200") else "closed"


@pytest.mark.parametrize("secure", [True, False], ids=["tls", "plain"])
async def test_a_connection_made_as_the_server_stops_is_closed_not_left_open(
        tmp_path: Path, secure: bool) -> None:
    tls = InternalTls(TlsDir(TEST_CA.issue(tmp_path / "tls", "broker", "stopping")))
    calls: list[None] = []
    app = counting_app(calls)
    outcomes: list[str] = []
    for turns in range(10):  # the loop's turns between the client's connect and the stop
        served = await serve(app, "127.0.0.1", 0, open_tls=tls.open_server if secure else None)
        client = asyncio.create_task(one_request(served.port, unchecked() if secure else None))
        for _ in range(turns):
            await asyncio.sleep(0)
        # The grace is long: a connection left out of the stop would hold it to the end
        # and still be open after it, and the client would wait for an end never sent.
        await served.stop(grace=15)
        assert not served.server.server_state.connections, turns
        outcomes.append(await within(client, 10))
        await served.stop(grace=15)  # a second stop does nothing more
    assert set(outcomes) <= {"refused", "closed", "answered, then closed"}
    # The turns cover both ends: the connection refused, and answered before the stop.
    assert {"refused", "answered, then closed"} <= set(outcomes), outcomes
    # The program ran each request it answered, and none other.
    assert len(calls) == outcomes.count("answered, then closed")


def idle_after_one_answer(port: int, answered: threading.Event,
                          release: threading.Event) -> bytes:
    """One request over TLS, its answer read, then the connection kept open and never read
    again (as a pooled connection is), until ``release``: a close the server sends stays
    unanswered."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            unchecked().wrap_socket(raw) as tls:
        tls.sendall(b"GET / HTTP/1.1\r\nhost: here\r\n\r\n")
        got = b""
        while not got.endswith(b"hello"):
            got += tls.recv(4096)
        answered.set()
        release.wait(60)
    return got


async def test_an_idle_tls_connection_whose_peer_reads_nothing_does_not_hold_the_stop(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tls = InternalTls(TlsDir(TEST_CA.issue(tmp_path / "tls", "broker", "idle")))
    calls: list[None] = []
    served = await serve(counting_app(calls), "127.0.0.1", 0, open_tls=tls.open_server)
    answered, release = threading.Event(), threading.Event()
    client = asyncio.create_task(asyncio.to_thread(
        idle_after_one_answer, served.port, answered, release))
    try:
        assert await asyncio.to_thread(answered.wait, 10)
        assert len(served.server.server_state.connections) == 1  # kept alive, idle
        started = time.monotonic()
        # Before, the unanswered close held the stop until the grace ran out (asyncio
        # itself would have waited 30 s for it).
        await within(served.stop(grace=30), 10)
        took = time.monotonic() - started
    finally:
        release.set()
        got = await within(client, 10)
    assert took < 5, took
    assert not served.server.server_state.connections
    assert got.startswith(b"HTTP/1.1 200")
    assert len(calls) == 1
    assert "grace" not in caplog.text  # cut as idle, not after the grace
