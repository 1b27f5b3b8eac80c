"""Serve an ASGI app with uvicorn inside the running event loop.

Daemons run their HTTP server, gossip and background tasks in one loop, so
the server is started as a task rather than owning the process. Port 0 binds
an ephemeral port; ``Served.port`` reports the one the kernel chose. With
``tls`` (an internal listener), every connection is mutual TLS: refused
handshakes are counted and each request knows its caller
(``bodega.runtime.tls.gate``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from dataclasses import dataclass
from typing import Any

import uvicorn

from bodega.runtime.binding import BindError
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.gate import counting_server_context, gate_protocol
from bodega.runtime.waits import within

log = logging.getLogger("bodega.serve")


class _Server(uvicorn.Server):
    """uvicorn's server, minus its wake-up every 0.1 s to look whether it should exit: told
    to by ``Served.stop``, it wakes then (and each second for its Date header)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.exit_asked = asyncio.Event()

    async def main_loop(self) -> None:
        counter = 0  # on_tick refreshes the Date header when counter % 10 == 0: every time
        while not await self.on_tick(counter):
            with contextlib.suppress(TimeoutError):
                await within(self.exit_asked.wait(), 1.0)


@dataclass
class Served:
    server: _Server
    task: asyncio.Task[None]
    host: str
    port: int
    secure: bool = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.secure else 'http'}://{host}:{self.port}"

    async def stop(self, grace: float = 5.0) -> None:
        self.server.should_exit = True
        self.server.exit_asked.set()
        try:
            await within(asyncio.shield(self.task), grace)
        except TimeoutError:
            self.server.force_exit = True
            await self.task


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)  # two sockets bound with SO_REUSEADDR collide only here
    except OSError as exc:
        sock.close()
        raise BindError(exc, host, port, "TCP") from exc
    sock.setblocking(False)
    return sock


async def serve(app: Any, host: str, port: int, *, sock: socket.socket | None = None,
                tls: InternalTls | None = None,
                open_tls: ssl.SSLContext | None = None) -> Served:
    """Start serving ``app``; returns once the socket accepts connections. ``tls``: mutual
    TLS (an internal listener); ``open_tls``: TLS that asks clients for no certificate."""
    sock = sock or bind(host, port)
    bound_port = 0 if sock.family == socket.AF_UNIX else int(sock.getsockname()[1])
    http = _http_protocol()
    # No proxy headers: none of these listeners sits behind a proxy that sets them (the
    # proxy's own front, behind HAProxy, is not served here), and trusting X-Forwarded-For
    # from loopback would let a local client choose the address the failed-authentication
    # limiter counts (and parsing them cost every request a little).
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=75,
        proxy_headers=False,
        backlog=2048, http=http if tls is None else gate_protocol(http),
        ssl_context_factory=(
            (lambda _config, _default: counting_server_context(tls)) if tls is not None
            else (lambda _config, _default: open_tls) if open_tls is not None else None),
    )
    server = _Server(config)
    task = asyncio.create_task(_serve_without_signal_handlers(server, sock))
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError(f"server on {host}:{bound_port} exited while starting")
        await asyncio.sleep(0.005)
    log.info("serving on %s:%d%s", host, bound_port,
             " (mutual TLS)" if tls else " (TLS)" if open_tls else "")
    return Served(server=server, task=task, host=host, port=bound_port,
                  secure=tls is not None or open_tls is not None)


async def _serve_without_signal_handlers(server: uvicorn.Server, sock: socket.socket) -> None:
    # Server.serve() swaps in its own SIGINT/SIGTERM handlers and re-raises the signal
    # when it ends; a daemon runs several servers and owns its signals, so skip that layer.
    await server._serve(sockets=[sock])


def _http_protocol() -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol: httptools' parser when installed, else h11's."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol
        return H11Protocol
    return HttpToolsProtocol
