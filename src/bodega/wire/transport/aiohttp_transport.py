"""The daemons' transport: aiohttp sessions, pooled, one per daemon for every peer.

Services call each other on every placement, and aiohttp's client costs a tenth of
the CPU per request that httpx's does (measured: about 4,400 against 430 requests/s
from one core, same server). A connection given up on is reset, never shut down
politely (``AbortingHandler``, ``abortive_socket``).
"""

from __future__ import annotations

import contextlib
import functools
import json as jsonlib
import os
import socket
import ssl as ssllib
import struct
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

from bodega.wire.transport.seam import (
    CONNECT_TIMEOUT,
    Answer,
    Call,
    NoAnswer,
    NotConnected,
    Streamed,
    cause,
)


def session(connections_per_host: int = 32,
            ssl: ssllib.SSLContext | None = None) -> aiohttp.ClientSession:
    """A pooled session; one per daemon serves every peer (pools are kept per host).

    ``ssl``: the component's client context (``bodega.runtime.tls``) for its
    internal links: every ``https`` peer is checked against the cluster CA and
    shown this component's certificate."""
    # Idle connections live 60 s, under the 75 s servers keep them (runtime/serve.py), so a
    # pooled connection is never reused just as its server closes it.
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=connections_per_host,
                                     keepalive_timeout=60, ttl_dns_cache=60,
                                     socket_factory=abortive_socket,
                                     ssl=ssl if ssl is not None else True)
    # aiohttp has no public way to choose how a connection closes: its protocol factory
    # (a private attribute, checked by tests/integration/wire/transport/test_abortive_close.py).
    connector._factory = functools.partial(  # type: ignore[assignment]
        AbortingHandler, loop=connector._loop)
    return aiohttp.ClientSession(connector=connector, json_serialize=_dumps)


class AbortingHandler(ResponseHandler):
    """Closes a connection by aborting it, TLS or not.

    With TLS, closing is a shutdown: a close_notify is sent, and the peer's awaited
    for up to 30 s before the socket itself is closed; all that time a request given up
    on (see ``abortive_socket``) is still retransmitted by the kernel, and a peer cut off
    meanwhile acts on it after the heal. Aborting closes the socket at once, and its
    ``SO_LINGER`` makes that a reset."""

    def close(self) -> None:
        self.abort()


def abortive_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A socket whose close is a reset: the kernel drops what it has not yet delivered.

    A request given up on (a timeout while the peer is cut off) is otherwise still in
    the kernel's send queue after the close and retransmitted until it gets through, so
    the peer would act on it after the heal, after requests answered since (found by
    the chaos suite's partition scenario). This client only closes a connection once it
    has its answer or has given up, so nothing it still wants is ever dropped."""
    family, kind, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = socket.socket(family=family, type=kind, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return sock


def why_unconnected(exc: Exception, connect_timeout: float | None = CONNECT_TIMEOUT) -> str:
    """A few words on why a connection was not made ("connection refused"), not the
    library's repr (which names its SSL setting even for plain HTTP)."""
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "host name not resolved"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        why = getattr(exc.certificate_error, "verify_message", None) or exc.certificate_error
        return f"its certificate is refused: {why}"
    if isinstance(exc, aiohttp.ClientConnectorSSLError):
        return f"TLS handshake failed: {getattr(exc.os_error, 'reason', None) or exc.os_error}"
    if isinstance(exc, aiohttp.ClientConnectorError) and exc.os_error.errno:
        return os.strerror(exc.os_error.errno).lower()
    if isinstance(exc, aiohttp.ConnectionTimeoutError | TimeoutError):
        return f"no connection in {connect_timeout:g}s" if connect_timeout else "no connection"
    return exc.__class__.__name__


def _dumps(data: Any) -> str:
    return jsonlib.dumps(data, separators=(",", ":"))


class AiohttpTransport:
    """``http``: a session to share (kept open by its owner); None: one of its own, made
    with the client context ``ssl`` on first use and closed by ``aclose``."""

    def __init__(self, http: aiohttp.ClientSession | None = None,
                 ssl: ssllib.SSLContext | None = None) -> None:
        self._own = http is None
        self._http = http
        self._ssl = ssl

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = session(ssl=self._ssl)
        return self._http

    async def aclose(self) -> None:
        if self._own and self._http is not None:
            await self._http.close()

    def _request(self, call: Call) -> Any:
        return self.http.request(
            call.method, call.url, data=call.body if call.chunks is None else call.chunks,
            params=list(call.query) or None,
            headers=dict(call.headers or {}),
            timeout=aiohttp.ClientTimeout(total=call.timeout,
                                          sock_connect=call.connect_timeout))

    async def send(self, call: Call) -> Answer:
        try:
            async with self._request(call) as response:
                return Answer(response.status, await response.read())
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise NotConnected(why_unconnected(exc, call.connect_timeout)) from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise NoAnswer(cause(exc)) from exc

    @contextlib.asynccontextmanager
    async def stream(self, call: Call) -> AsyncIterator[Streamed]:
        try:
            response: aiohttp.ClientResponse = await self._request(call)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise NotConnected(why_unconnected(exc, call.connect_timeout)) from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise NoAnswer(cause(exc)) from exc
        try:
            yield Streamed(response.status, _chunks(response),
                           {name.lower(): value for name, value in response.headers.items()})
        finally:
            response.release()  # back to the pool if the body was read whole, else closed


async def _chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.content.iter_any():
            yield chunk
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise NoAnswer(cause(exc)) from exc
