"""An async JSON-over-HTTP client that turns error answers back into ``BodegaError``s.

Every bodega service answers errors as ``{"error", "status"}``; this client
raises the matching ``BodegaError`` subclass (a 409 is a ``Conflict``, a 412
with ``insufficient_capacity`` an ``InsufficientCapacity``), so a caller can
handle it or pass it on unchanged. A connection that cannot be made is
``Unreachable`` (an ``Unavailable``, with a few words on why): the server
never saw the request. A request sent without an answer coming back (a
timeout, a dropped connection) is ``Indeterminate``: it may have taken
effect, and only an idempotent retry can tell.

It runs on aiohttp: services call each other on every placement, and its
client costs a tenth of the CPU per request that httpx's does (measured:
about 4,400 against 430 requests/s from one core, same server).
"""

from __future__ import annotations

import functools
import json as jsonlib
import os
import socket
import ssl as ssllib
import struct
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import aiohttp
from aiohttp.client_proto import ResponseHandler
from pydantic import BaseModel, TypeAdapter, ValidationError

from bodega.model.errors import Indeterminate, Unreachable, from_wire

NONCE_HEADER = "fly-machine-lease-nonce"
CONNECT_TIMEOUT = 3.0  # seconds to open a connection (loopback or a LAN peer)
Params = Mapping[str, Any] | Sequence[tuple[str, Any]] | None
M = TypeVar("M", bound=BaseModel)


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
    # (a private attribute, checked by tests/integration/wire/test_abortive_close.py).
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


def why_unconnected(exc: Exception) -> str:
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
        return f"no connection in {CONNECT_TIMEOUT:g}s"
    return exc.__class__.__name__


def _dumps(data: Any) -> str:
    return jsonlib.dumps(data, separators=(",", ":"))


def _query(params: Params) -> list[tuple[str, str]] | None:
    if params is None:
        return None
    pairs = params.items() if isinstance(params, Mapping) else params
    return [(str(k), _text(v)) for k, v in pairs if v is not None]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class JsonClient:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        client: aiohttp.ClientSession | None = None,
        timeout: float = 10.0,
        what: str = "server",
        ssl: ssllib.SSLContext | None = None,
    ) -> None:
        """``token``: a bearer token for the public API (None on mutual-TLS links, where the
        certificate in ``ssl`` says who calls)."""
        self.base_url = base_url.rstrip("/")
        self._own = client is None
        self._session = client
        self._ssl = ssl
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout
        self.what = what

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = session(ssl=self._ssl)
        return self._session

    async def aclose(self) -> None:
        if self._own and self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> JsonClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Params = None,  # a mapping, or (key, value) pairs for repeated keys
        nonce: str | None = None,
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
        encoded: bytes | None = None,
    ) -> Any:
        """The answer as JSON values (None for an empty one). ``json``: a value to encode;
        ``encoded``: a body already encoded as JSON."""
        data = await self.exchange(method, path, json=json, params=params, nonce=nonce,
                                   timeout=timeout, headers=headers, encoded=encoded)
        if not data:
            return None
        try:
            return jsonlib.loads(data)
        except ValueError:
            return {"error": data[:200].decode(errors="replace")}

    async def answer(self, model: type[M], method: str, path: str, **call: Any) -> M:
        """The answer read into ``model`` by pydantic's own JSON parser (no dict between)."""
        data = await self.exchange(method, path, **call)
        try:
            return model.model_validate_json(data or b"null")
        except ValidationError as exc:
            raise self._unreadable(model, exc) from None

    async def answers(self, model: type[M], method: str, path: str, **call: Any) -> list[M]:
        """An answer that is a list, each item read into ``model``."""
        data = await self.exchange(method, path, **call)
        try:
            return _list_of(model).validate_json(data or b"null")
        except ValidationError as exc:
            raise self._unreadable(model, exc) from None

    def _unreadable(self, model: type[BaseModel], exc: ValidationError) -> Indeterminate:
        # Whatever the call did, this caller cannot tell from an answer it cannot read.
        return Indeterminate(f"{self.what} at {self.base_url} answered what is not a "
                             f"{model.__name__}: {exc.errors()[0].get('msg', 'invalid')}")

    async def exchange(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Params = None,
        nonce: str | None = None,
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
        encoded: bytes | None = None,
    ) -> bytes | None:
        """One call; the answer's body as it came (None for an empty 202 or 204). An error
        answer raises its ``BodegaError``."""
        headers = {**self.headers, **(headers or {})}
        if encoded is not None:
            headers["content-type"] = "application/json"
        total = timeout or self.timeout
        if nonce:
            headers[NONCE_HEADER] = nonce
        try:
            async with self.http.request(
                method, self.base_url + path, json=json, data=encoded, params=_query(params),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=total,
                                              sock_connect=min(total, CONNECT_TIMEOUT)),
            ) as response:
                status = response.status
                data = await response.read()
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            # The connection was never made: the server cannot have seen the request.
            reason = why_unconnected(exc)
            raise Unreachable(f"{self.what} at {self.base_url} unreachable ({reason})",
                              url=self.base_url, reason=reason) from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise Indeterminate(f"{self.what} at {self.base_url} did not answer: "
                                f"{exc.__class__.__name__} {exc}".strip()) from exc
        if status in (202, 204) and not data:
            return None
        if status >= 400:
            try:
                body = jsonlib.loads(data) if data else None
            except ValueError:
                body = {"error": data[:200].decode(errors="replace")}
            raise from_wire(status, body)
        return data


@functools.cache
def _list_of(model: type[M]) -> TypeAdapter[list[M]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]
