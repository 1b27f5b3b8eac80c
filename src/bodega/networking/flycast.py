"""Flycast on one host: an app's private address, relayed to the proxy.

Every host serves every Flycast address (host 0 of the /48, ``Layout.flycast``)
on its machine bridge, port 80, so a machine reaches its network's apps
through the proxy wherever it runs: load balancing, starting a stopped machine
and stopping idle ones, as on the public port. A connection from a machine of
another network than the address's is closed at once (the address is the
host's own, so the forward fence does not see it). Each request's ``Host`` is
rewritten to ``<app>.<base domain>``, the name the proxy routes by; bodies are
framed by ``Content-Length``; a chunked request body makes the rest of the
connection a plain pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
from dataclasses import dataclass, field

from bodega.networking.core.sixpn import Layout

log = logging.getLogger("bodega.networking.flycast")

PORT = 80
MAX_HEAD = 65536


@dataclass
class FlycastRelay:
    layout: Layout
    proxy: tuple[str, int]  # the proxy's public listener
    base_domain: str = "localhost"
    port: int = PORT
    servers: dict[str, asyncio.Server] = field(default_factory=dict)
    refused: int = 0

    async def serve(self, wanted: dict[str, str]) -> None:
        """Listen on exactly the addresses of ``wanted`` (address -> app)."""
        for address in sorted(set(self.servers) - set(wanted)):
            self.servers.pop(address).close()
        for address, app in sorted(wanted.items()):
            if address in self.servers:
                continue
            sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Workers sharing one kernel all serve every Flycast address (as the resolver).
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND: the address comes with the row
            sock.bind((address, self.port))
            self.servers[address] = await asyncio.start_server(
                functools.partial(self._relay, address=address, app=app), sock=sock)
            log.info("flycast: %s serves %s on port %d", address, app, self.port)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     address: str, app: str) -> None:
        peer = str(writer.get_extra_info("peername")[0])
        source, target = self.layout.fields(peer), self.layout.fields(address)
        if source is None or target is None or source.network != target.network:
            self.refused += 1
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.proxy)
        except OSError as exc:
            log.warning("flycast: the proxy at %s:%d is unreachable: %s", *self.proxy, exc)
            writer.close()
            return
        back = asyncio.create_task(_pipe(up_reader, writer))
        try:
            await _requests(reader, up_writer, f"{app}.{self.base_domain}")
        finally:
            with contextlib.suppress(Exception):
                up_writer.write_eof()
            await back
            up_writer.close()
            writer.close()

    def close(self) -> None:
        for server in self.servers.values():
            server.close()
        self.servers.clear()


def rewrite_head(head: bytes, host: str) -> tuple[bytes, int | None]:
    """The request head with ``Host: host``; and its body's length (None: chunked)."""
    lines = head.split(b"\r\n")
    out, length = [lines[0], b"Host: " + host.encode()], 0
    chunked = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        lowered = name.strip().lower()
        if lowered == b"host":
            continue
        if lowered == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
        chunked |= lowered == b"transfer-encoding" and b"chunked" in value.lower()
        out.append(line)
    return b"\r\n".join(out), None if chunked else length


async def _requests(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    host: str) -> None:
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return
        rewritten, length = rewrite_head(head[:-4], host)
        writer.write(rewritten + b"\r\n\r\n")
        if length is None:  # chunked: not framed here, the rest is passed on as it is
            await _pipe(reader, writer)
            return
        if length:
            writer.write(await reader.readexactly(length))
        await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    with contextlib.suppress(Exception):
        writer.write_eof()
