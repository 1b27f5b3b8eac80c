"""Waking a TCP service's machine for a connection, then piping the connection to it.

HAProxy sends a TCP listener's connection here (its backup server) when none
of the app's machines can take it. One loopback listener per public port:
it reads the PROXY v2 header HAProxy sends first (the client's address),
starts one stopped machine of the service (connections arriving meanwhile
share that start), sends the service its own PROXY header if it asks for
one, and copies bytes both ways until either side closes. A running machine
that does not accept within ``routes.CONNECT_TIMEOUT`` (its host stopped
answering) is passed for the next, as on the HTTP data plane; the last one
that could take the connection is given ``routes.PATIENT_CONNECT_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from bodega.proxy.core.balance import usable, wake_candidate
from bodega.proxy.core.proxy_protocol import V2_HEADER, BadHeader, encode, parse_v2, v2_length
from bodega.proxy.core.routes import (
    CONNECT_TIMEOUT,
    PATIENT_CONNECT_TIMEOUT,
    Backend,
    RoutingTable,
)
from bodega.proxy.core.tcp_routes import TcpTable
from bodega.proxy.wake import Waker
from bodega.runtime.waits import within

log = logging.getLogger("bodega.proxy.tcp")

TRUSTED_FOR = 10.0  # seconds a machine it started counts as running before its row says so
BUFFER = 65536
MAX_TRIES = 3  # machines a connection is offered to, as on the HTTP data plane


class TcpActivator:
    def __init__(self, tcp: TcpTable, table: RoutingTable, waker: Waker, region: str) -> None:
        self.tcp = tcp
        self.table = table
        self.waker = waker
        self.region = region
        self.servers: dict[int, asyncio.Server] = {}
        self._starting: dict[int, asyncio.Task[Backend | None]] = {}
        self._started: dict[str, float] = {}  # machine -> until when it is trusted running

    def ports(self) -> dict[int, int]:
        """Public port -> the loopback port of its activator."""
        return {port: int(server.sockets[0].getsockname()[1])
                for port, server in self.servers.items()}

    async def ensure(self, ports: set[int]) -> dict[int, int]:
        """An activator for each of ``ports`` and none for others."""
        for port in set(self.servers) - ports:
            self.servers.pop(port).close()
        for port in sorted(ports - set(self.servers)):
            self.servers[port] = await asyncio.start_server(self._handler(port), "127.0.0.1", 0)
        return self.ports()

    def _handler(self, port: int) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                              Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._handle(port, reader, writer)
        return handle

    async def _handle(self, port: int, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            head = await reader.readexactly(V2_HEADER)
            addresses = parse_v2(head, await reader.readexactly(v2_length(head)))
            connected = await self._connect(port)
            if connected is None:
                log.warning("port %d: no machine could take a connection", port)
                return
            up_reader, up_writer = connected
            upstream = up_writer  # closed below, whatever comes
            listener = self.tcp.listeners().get(port)
            if listener is None:
                log.warning("port %d: its listener went as a connection came", port)
                return
            if listener.proxy_proto:
                up_writer.write(encode(addresses, listener.proxy_proto))
            await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError, BadHeader) as exc:
            log.info("port %d: connection ended: %s", port, exc)
        finally:
            for side in (upstream, writer):
                if side is not None:
                    side.close()

    async def _connect(self, port: int
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to a machine of ``port``'s service that accepted one in time."""
        tried: set[str] = set()
        for _ in range(MAX_TRIES):
            backend, alone = await self._machine(port, frozenset(tried))
            if backend is None:
                return None
            tried.add(backend.machine_id)
            # Giving up soon pays only when another machine can take the connection.
            wait = PATIENT_CONNECT_TIMEOUT if alone else CONNECT_TIMEOUT
            try:
                return await within(asyncio.open_connection(*backend.address), wait)
            except (OSError, TimeoutError) as exc:
                log.info("port %d: machine %s did not accept a connection (%s); trying "
                         "another", port, backend.machine_id, exc or "no answer")
        return None

    async def _machine(self, port: int, tried: frozenset[str]) -> tuple[Backend | None, bool]:
        """A machine not yet tried that can take ``port``'s connection, nearest first:
        running, or started now; and whether it is the last one that could."""
        now = time.monotonic()
        backends = self.tcp.backends(port)
        running = sorted((b for b in backends if b.machine_id not in tried and (
            usable(b, self.table.worker_alive) or self._started.get(b.machine_id, 0.0) > now)),
            key=lambda b: b.region != self.region)
        if running:
            return running[0], len(running) == 1
        task = self._starting.get(port)
        if task is None or task.done():
            task = asyncio.create_task(self._start(port, backends))
            self._starting[port] = task
        return await asyncio.shield(task), True

    async def _start(self, port: int, backends: list[Backend]) -> Backend | None:
        candidate = wake_candidate([b for b in backends if b.autostart], self.region,
                                   self.table.worker_alive)
        if candidate is None:
            return None
        # What the waker answers is the machine as the HTTP table knows it (another port,
        # when it has an HTTP service too): this service's port is the candidate's.
        if await self.waker.start(candidate) is None:
            return None
        self._started[candidate.machine_id] = time.monotonic() + TRUSTED_FOR
        log.info("port %d: started %s (%s) for a connection", port, candidate.machine_id,
                 candidate.app)
        return replace(candidate, state="started")

    async def close(self) -> None:
        for server in self.servers.values():
            server.close()
        for task in self._starting.values():
            task.cancel()
        self.servers.clear()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(BUFFER):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

