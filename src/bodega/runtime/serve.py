"""Serve an ASGI app with uvicorn inside the running event loop.

Daemons run their HTTP server, gossip and background tasks in one loop, so
the server is started as a task rather than owning the process. Port 0 binds
an ephemeral port; ``Served.port`` reports the one the kernel chose. With
``tls`` (an internal listener), every connection is mutual TLS: refused
handshakes are counted and each request knows its caller
(``bodega.runtime.tls.gate``).

Stopping lets requests under way finish, then closes every connection uvicorn
knows; uvicorn knows a TLS connection only once its handshake is done. One
done during the stop would be served as if nothing stopped, and hold the stop
for its grace (keep-alive). So each connection reaches uvicorn's protocol
through ``_Handover``, which aborts one whose handshake is done once the stop
began (the client sees a reset, never a request half run). A handshake still
under way when the stop returns ends that way, or in its own timeout. On
asyncio's own loop, accepting stops before the server closes: a connection
accepted just before would otherwise meet the closed server and be dropped
unclosed (Python 3.11's ``Server._attach`` asserts it is open); uvloop makes
the transport as it accepts.

A TLS connection uvicorn closes at the stop (no request under way on it: an idle
keep-alive) ends only once its peer answers the close (close_notify), which a
client that keeps idle connections in a pool and reads none of them never does
(asyncio would wait 30 s): such a connection is cut once its peer had
``CLOSE_ANSWER`` seconds to answer, so idle peers never hold a stop for its
grace. Only requests under way are given the grace; one that outlives it is
said in the log.

What uvicorn's protocol writes in one turn of the loop goes out in one write
(``_Coalesced``): it writes a response's head and body apart, and a small answer
would cost two segments through the kernel and wake its client twice (small
answers one after another on a keep-alive connection, ``python -m
bench.serve_writes``: 38 µs of the server's CPU and 25 of the client's a request
apart, 35 and 19 joined).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import uvicorn

from bodega.runtime.binding import BindError
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.gate import counting_server_context, note_peer
from bodega.runtime.waits import within

log = logging.getLogger("bodega.serve")

CLOSE_ANSWER = 0.5  # seconds a closed connection's peer has to answer before it is cut
_LOOK_EVERY = 0.1  # seconds between looks at the connections while a stop waits
_ALONE = 64 * 1024  # bytes: a write this large is not held to join the next


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


class _Coalesced:
    """A connection's transport as uvicorn's HTTP protocol sees it: what the protocol writes
    in one turn of the loop goes out in one write. uvicorn writes a response's head and its
    body apart; on their own, each is a segment of its own through the kernel, and the
    client is woken for the head only to wait for the body. A large write goes at once, as
    it is (joining it would copy it), after what came before it; so does every write once
    the connection is handed to another protocol (a WebSocket upgrade), which may end its
    side of the stream (``write_eof``) right after a write."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._pending: list[bytes] = []
        self._through = False  # handed to another protocol: writes go as they come

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._through or len(data) >= _ALONE:
            self._flush()
            self._transport.write(data)
            return
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        self.write(b"".join(chunks))

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._flush()
        self._through = True
        self._transport.set_protocol(protocol)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def __getattr__(self, name: str) -> Any:  # everything else is the transport's
        return getattr(self._transport, name)


class _Handover(asyncio.Protocol):
    """Made for each accepted connection; once it is established (its handshake done), hands
    it to uvicorn's protocol, which gets every later event, unless the server is stopping."""

    inner_class: type[asyncio.Protocol]
    stopping: asyncio.Event
    note: Callable[[asyncio.BaseTransport, dict[str, object]], None] | None

    def __init__(self, **kwargs: Any) -> None:
        # The connection's own copy of the app state, for ``note`` to add to.
        self._state: dict[str, object] = dict(kwargs.get("app_state") or {})
        kwargs["app_state"] = self._state
        self._inner = self.inner_class(**kwargs)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.stopping.is_set():
            transport.abort()  # type: ignore[attr-defined]  # a socket's transport
            return
        if self.note is not None:
            self.note(transport, self._state)
        transport.set_protocol(self._inner)
        self._inner.connection_made(_Coalesced(cast(asyncio.Transport, transport)))  # type: ignore[arg-type]


def _handover(inner: type[asyncio.Protocol], stopping: asyncio.Event,
              note: Callable[[asyncio.BaseTransport, dict[str, object]], None] | None,
              ) -> type[asyncio.Protocol]:
    """A protocol class for uvicorn's ``http`` setting; ``note`` is told of each connection
    and its state before its first request (the TLS gate's caller)."""
    return type("Handover", (_Handover,), {
        "inner_class": inner, "stopping": stopping,
        "note": None if note is None else staticmethod(note)})


@dataclass
class Served:
    server: _Server
    task: asyncio.Task[None]
    host: str
    port: int
    stopping: asyncio.Event  # what its connections' ``_Handover`` looks at
    sock: socket.socket
    secure: bool = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.secure else 'http'}://{host}:{self.port}"

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let requests under way finish (for up to ``grace`` seconds), and
        close every connection. Once stopped, stopping again does nothing."""
        if self.stopping.is_set():
            await self.task
            return
        self.stopping.set()
        loop = asyncio.get_running_loop()
        if isinstance(loop, asyncio.SelectorEventLoop):  # not uvloop, which has no such gap
            loop.remove_reader(self.sock)
            await asyncio.sleep(0)  # connections accepted already get their transports
        self.server.should_exit = True
        self.server.exit_asked.set()
        if not await self._served_out(grace):
            log.warning("stopping %s: %d connection(s) still open after the %.0f s grace; "
                        "cut", self.url, len(self.server.server_state.connections), grace)
            self.server.force_exit = True
            await self.task
        # uvicorn waited for its connections, up to the grace: any left are cut.
        for connection in list(self.server.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()

    async def _served_out(self, grace: float) -> bool:
        """Wait for the server to end, up to ``grace`` seconds; True once it has. A
        connection closed (its response sent) whose peer leaves the close unanswered for
        ``CLOSE_ANSWER`` seconds, with nothing left to send, is cut meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        closed_at: dict[object, float] = {}
        while True:
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                await within(asyncio.shield(self.task), min(_LOOK_EVERY, left))
                return True
            except TimeoutError:
                pass
            now = loop.time()
            for connection in list(self.server.server_state.connections):
                transport = getattr(connection, "transport", None)
                if transport is None or not transport.is_closing():
                    continue
                since = closed_at.setdefault(connection, now)
                if now - since >= CLOSE_ANSWER and transport.get_write_buffer_size() == 0:
                    transport.abort()


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
    TLS (an internal listener); ``open_tls``: TLS that requires no client certificate (the
    context says whether it asks for one)."""
    sock = sock or bind(host, port)
    bound_port = 0 if sock.family == socket.AF_UNIX else int(sock.getsockname()[1])
    stopping = asyncio.Event()
    # No proxy headers: none of these listeners sits behind a proxy that sets them (the
    # proxy's own front, behind HAProxy, is not served here), and trusting X-Forwarded-For
    # from loopback would let a local client choose the address the failed-authentication
    # limiter counts (and parsing them cost every request a little).
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=75,
        proxy_headers=False,
        # With ``open_tls`` too: a context that asks for a certificate without requiring
        # one (the image registry's) lets its requests know who presented one.
        backlog=2048, http=_handover(_http_protocol(), stopping,
                                     note_peer if tls or open_tls else None),
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
    return Served(server=server, task=task, host=host, port=bound_port, stopping=stopping,
                  sock=sock, secure=tls is not None or open_tls is not None)


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
