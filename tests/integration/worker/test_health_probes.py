"""Health-check probes over real loopback sockets: results, timeouts, and no leaked connections."""

from __future__ import annotations

import asyncio

from bodega.worker.core.checks import CheckSpec
from bodega.worker.ops.health import probe


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
