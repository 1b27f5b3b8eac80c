"""An async JSON-over-HTTP client that turns error answers back into ``BodegaError``s.

Every bodega service answers errors as ``{"error", "status"}``; this client
raises the matching ``BodegaError`` subclass (a 409 is a ``Conflict``, a 412
with ``insufficient_capacity`` an ``InsufficientCapacity``), so a caller can
handle it or pass it on unchanged. A connection that cannot be made is
``Unreachable`` (an ``Unavailable``, with a few words on why): the server
never saw the request. A request sent without an answer coming back (a
timeout, a dropped connection) is ``Indeterminate``: it may have taken
effect, and only an idempotent retry can tell.

Calls travel through a ``Transport`` (``wire/transport/seam.py``): aiohttp's pooled
sessions unless the client is given another (the command line's
``StreamHttp``). This module imports no HTTP library itself.
"""

from __future__ import annotations

import functools
import json as jsonlib
import ssl as ssllib
from collections.abc import AsyncIterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from bodega.model.errors import Indeterminate, Unreachable, from_wire
from bodega.wire.transport.seam import CONNECT_TIMEOUT, Call, NoAnswer, NotConnected, Transport

if TYPE_CHECKING:
    import aiohttp

NONCE_HEADER = "fly-machine-lease-nonce"
Params = Mapping[str, Any] | Sequence[tuple[str, Any]] | None
M = TypeVar("M", bound=BaseModel)


def _dumps(data: Any) -> bytes:
    return jsonlib.dumps(data, separators=(",", ":")).encode()


def _query(params: Params) -> list[tuple[str, str]]:
    if params is None:
        return []
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
        transport: Transport | None = None,
    ) -> None:
        """``token``: a bearer token for the public API (None on mutual-TLS links, where the
        certificate in ``ssl`` says who calls). ``client``: an aiohttp session to share;
        ``transport``: another way for calls to travel (``client`` and ``ssl`` then unused).
        """
        self.base_url = base_url.rstrip("/")
        self._session = client
        self._ssl = ssl
        self._transport = transport
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout
        self.what = what

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            from bodega.wire.transport.aiohttp_transport import AiohttpTransport

            self._transport = AiohttpTransport(self._session, self._ssl)
        return self._transport

    @property
    def http(self) -> aiohttp.ClientSession:
        """The aiohttp session calls travel on (a daemon's streams use it directly)."""
        from bodega.wire.transport.aiohttp_transport import AiohttpTransport

        transport = self.transport
        if not isinstance(transport, AiohttpTransport):
            raise TypeError(f"{self.what} client travels on {type(transport).__name__}")
        return transport.http

    def outgoing(self, method: str, path: str, *, params: Params = None,
             headers: Mapping[str, str] | None = None, body: bytes | None = None,
             timeout: float | None = None, chunks: AsyncIterable[bytes] | None = None
             ) -> Call:
        """A call to ``path`` with this client's headers; ``timeout``: the client's unless
        given (None: no bound on the whole call, as a followed stream needs)."""
        return Call(method, self.base_url + path, _query(params),
                    {**self.headers, **(headers or {})}, body, timeout,
                    min(timeout or CONNECT_TIMEOUT, CONNECT_TIMEOUT), chunks)

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()

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
        chunks: AsyncIterable[bytes] | None = None,
    ) -> bytes | None:
        """One call; the answer's body as it came (None for an empty 202 or 204). An error
        answer raises its ``BodegaError``. ``chunks``: a body streamed as it comes."""
        headers = dict(headers or {})
        if json is not None:
            encoded = _dumps(json)
        if encoded is not None:
            headers["content-type"] = "application/json"
        if nonce:
            headers[NONCE_HEADER] = nonce
        try:
            answer = await self.transport.send(self.outgoing(
                method, path, params=params, headers=headers, body=encoded,
                timeout=timeout or self.timeout, chunks=chunks))
        except NotConnected as exc:
            # The connection was never made: the server cannot have seen the request.
            raise Unreachable(f"{self.what} at {self.base_url} unreachable ({exc.reason})",
                              url=self.base_url, reason=exc.reason) from exc
        except NoAnswer as exc:
            raise Indeterminate(f"{self.what} at {self.base_url} did not answer: {exc}"
                                ) from exc
        status, data = answer.status, answer.body
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
