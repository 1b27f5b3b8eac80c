"""Health-check probes over real loopback sockets: results, timeouts, answers however
they are written, a server that reads its request once at accept, and no leaked
connections."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import ssl
import threading
import time
from pathlib import Path

from bodega.runtime.tls.files import TlsDir
from bodega.worker.core.checks import CheckSpec
from bodega.worker.ops.health import probe
from tests.tls_kit import TEST_CA


class Server:
    """Counts connections open; answers HTTP with ``status`` or, if ``hang``, never."""

    def __init__(self, status: int = 200, hang: bool = False) -> None:
        self.status = status
        self.hang = hang
        self.open = 0
        self.seen: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            self.seen.append(head)
            if self.hang:
                await reader.read()  # until the prober hangs up
                return
            writer.write(f"HTTP/1.1 {self.status} X\r\nContent-Length: 0\r\n\r\n".encode())
            await writer.drain()
            await reader.read()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            writer.close()


async def serve(server: Server) -> tuple[asyncio.Server, int]:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    return listener, int(listener.sockets[0].getsockname()[1])


def spec(kind: str, port: int, timeout: float = 2.0) -> CheckSpec:
    return CheckSpec(name="c", type=kind, port=port, interval=1.0, timeout=timeout,
                     grace_period=0.0, path="/healthz", headers=(("X-Check", "yes"),))


async def closed(server: Server) -> bool:
    for _ in range(200):
        if server.open == 0:
            return True
        await asyncio.sleep(0.02)
    return False


async def test_http_status_decides_and_every_connection_is_closed() -> None:
    for status, expected in ((200, "passing"), (204, "passing"), (500, "critical"),
                             (302, "critical")):
        server = Server(status)
        listener, port = await serve(server)
        async with listener:
            result, output = await probe(spec("http", port), "127.0.0.1")
            assert result == expected, output
            assert str(status) in output
            assert b"GET /healthz HTTP/1.1" in server.seen[0]
            assert b"X-Check: yes" in server.seen[0]
            assert await closed(server)


async def test_a_server_that_never_answers_times_out_and_is_hung_up_on() -> None:
    server = Server(hang=True)
    listener, port = await serve(server)
    async with listener:
        result, output = await probe(spec("http", port, timeout=0.3), "127.0.0.1")
        assert (result, output) == ("critical", "timed out after 0.3s")
        assert await closed(server)


async def test_tcp_passes_when_the_port_accepts_and_fails_when_refused() -> None:
    server = Server()
    listener, port = await serve(server)
    async with listener:
        result, _ = await probe(spec("tcp", port), "127.0.0.1")
        assert result == "passing"
        assert await closed(server)
    result, output = await probe(spec("tcp", port), "127.0.0.1")
    assert result == "critical"
    assert "ConnectionRefusedError" in output


async def test_a_status_line_split_over_many_small_writes_is_read_whole() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            for piece in (b"HT", b"TP/1.1 2", b"00", b" O", b"K\r",
                          b"\nContent-Length: 0\r\n\r\n"):
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.02)  # each its own segment
        finally:
            writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with listener:
        port = int(listener.sockets[0].getsockname()[1])
        assert await probe(spec("http", port), "127.0.0.1") == ("passing", "GET /healthz: 200 OK")


async def test_a_connection_closed_with_no_answer_is_named_so() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
        finally:
            writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with listener:
        port = int(listener.sockets[0].getsockname()[1])
        assert await probe(spec("http", port), "127.0.0.1") == (
            "critical", "the connection was closed with no answer")


async def test_an_answer_that_is_not_http_is_named() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"SSH-2.0-OpenSSH_9.2\r\n")
            await writer.drain()
        finally:
            writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with listener:
        port = int(listener.sockets[0].getsockname()[1])
        assert await probe(spec("http", port), "127.0.0.1") == (
            "critical", "not an HTTP answer: b'SSH-2.0-OpenSSH_9.2\\r\\n'")


async def test_an_https_check_passes_on_a_tls_answer(tmp_path: Path) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(TlsDir(TEST_CA.issue(tmp_path / "tls", "worker", "m")).identity_path)
    server = Server()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=context)
    async with listener:
        port = int(listener.sockets[0].getsockname()[1])
        skip = dataclasses.replace(spec("http", port), protocol="https", tls_skip_verify=True)
        assert await probe(skip, "127.0.0.1") == ("passing", "GET /healthz: 200 X")
        checked = dataclasses.replace(skip, tls_skip_verify=False)  # a CA no one trusts
        result, output = await probe(checked, "127.0.0.1")
        assert (result, "CERTIFICATE_VERIFY_FAILED" in output) == ("critical", True), output
        assert await closed(server)


class ReadsOnceAtAccept:
    """Reads a connection once as soon as it accepts it, without waiting, and closes it
    unanswered if nothing is there: what busybox httpd does in the sandbox, where gVisor's
    host network ends a blocking read of a fresh connection at once. A thread of its own,
    blocked in accept, so it reads the moment the kernel queues a connection."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.answered = 0
        self.dropped = 0
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed: the test is over
            with conn:
                try:
                    conn.recv(4096, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    self.dropped += 1
                    continue
                self.answered += 1  # before the answer: the probe returns once it has it
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(timeout=5)


async def test_the_request_is_there_when_the_server_accepts_the_connection() -> None:
    """The probe's connection reaches the server's accept queue with its request in it
    (the handshake's last ACK rides on it): a server reading once at accept answers every
    probe, none of its connections dropped. It flapped a sandbox's check to critical ("not
    an HTTP answer") while it served."""
    server = ReadsOnceAtAccept()
    try:
        for _ in range(20):
            assert await probe(spec("http", server.port), "127.0.0.1") == (
                "passing", "GET /healthz: 200 OK")
        assert (server.answered, server.dropped) == (20, 0)
    finally:
        server.close()


async def test_a_stalled_event_loop_cannot_leave_the_request_out_of_the_handshake() -> None:
    """The worker's event loop stalls (another task's work, a loaded host) for longer than
    Linux holds a handshake's last ACK for the first data (200 ms), between every step of
    the probe: the request still rides on that ACK, since it is handed to the kernel as
    the connect starts, not from the loop, and a server reading once at accept answers."""
    server = ReadsOnceAtAccept()
    stalling = True

    async def stall() -> None:
        while stalling:
            # Holds the loop (not the GIL) on purpose, as a blocking call would.
            time.sleep(0.3)  # noqa: ASYNC251
            await asyncio.sleep(0)

    staller = asyncio.create_task(stall())
    try:
        for _ in range(2):
            assert await probe(spec("http", server.port, timeout=60), "127.0.0.1") == (
                "passing", "GET /healthz: 200 OK")
        assert (server.answered, server.dropped) == (2, 0)
    finally:
        stalling = False
        await staller
        server.close()
