"""The registry's subscription routes, both families, and the read-only SQL API.

Two callers, two routes, one place. ``MemberSubscriptions`` serves cluster members (a
daemon's certificate, or the admin's, on the daemon's mutual-TLS listener): the rows of
one table that match indexed columns, then their changes, straight from the replica's
applies, in memory, cut when the member falls behind (it re-subscribes for a snapshot).
``RegistryQueries`` serves users (the admin token, on the broker's public listener): any
SELECT kept current, its changes logged on disk so a client resumes after a restart. A
member needs every change of a table as it is applied and nothing kept; a user needs a
query's result and a log to resume from: one route could not serve both without one of
them paying for the other.

``POST /v1/registry/subscriptions``
    ``{"table": "machines", "where": {"app": "web"}}`` streams NDJSON: ``{"row": {...}}``
    per current row, then ``{"eoq": {"rows": n}}``, then ``{"change": {...}}`` per
    change, with a ``{"heartbeat": {}}`` line when idle so clients notice a dead
    connection. A consumer that falls behind gets ``{"error": ..., "status": "lagged"}``
    and the stream ends. Its role check is the ``registry`` rules of
    ``bodega.runtime.tls.core.access``.

Corrosion's user API, on the host's replica:

``POST /v1/queries``
    a statement (``wire/public/queries.py``); NDJSON: its columns, its rows, the end
    of the query, or an error line where it was cut.
``POST /v1/subscriptions``
    the same, answered with the ``corro-query-id`` header, the rows, the end of
    the query with the change the result is current as of, then a change line
    each time the result changes, for as long as the client stays.
``GET /v1/subscriptions/{id}``
    the subscription's current rows, then its changes; ``?from=N``: every
    change after N, then the live ones (410 once they are no longer kept).

Errors before the first line are bodega's error shape with a 4xx: a write is
403, anything else wrong with a statement 400, an unknown subscription 404.
Every route asks the mounter's ``authorize`` first (the agent passes the
cluster's admin token check): 401 without it.

The agent builds one, mounts ``routes()``, calls ``start()`` and ``stop()``
with its own, and ``changed(tables)`` after every transaction it applies to
the replica.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from bodega.model.errors import BadRequest, Unauthorized
from bodega.model.json import JsonObject
from bodega.registry.api.core.limits import QueryLimits
from bodega.registry.api.reader import Reader, Result
from bodega.registry.api.subscriptions import Ended, LiveSubscriptions, Opened, Subscription
from bodega.registry.membership.feed import FeedLagged
from bodega.runtime.tls.core.access import REGISTRY
from bodega.runtime.waits import within
from bodega.wire.public.queries import (
    MEDIA_TYPE,
    QUERY_ID_HEADER,
    Statement,
    change_line,
    columns_line,
    eoq_line,
    error_line,
    row_line,
    statement,
)
from bodega.wire.transport.http import Handler, handle_errors, read_json
from bodega.wire.transport.peer_access import PeerAccess

QUERIES_PATH = "/v1/queries"
SUBSCRIPTIONS_PATH = "/v1/subscriptions"
CHUNK = 64 * 1024  # lines are sent in pieces of about this size
MEMBER_SUBSCRIPTIONS_PATH = "/v1/registry/subscriptions"
HEARTBEAT = 15.0

Authorize = Callable[[Request], bool]
# (table, where): ``where`` as the client sent it, checked by the subscriber.
Subscribe = Callable[[str, Mapping[str, object]], Subscription]


def _line(value: JsonObject) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


class MemberSubscriptions:
    """``POST /v1/registry/subscriptions`` on a daemon's listener, for cluster members."""

    def __init__(self, *, access: PeerAccess, subscribe: Subscribe,
                 heartbeat: float = HEARTBEAT) -> None:
        self._access = access
        self._subscribe = subscribe
        self._heartbeat = heartbeat

    def routes(self) -> list[BaseRoute]:
        return [self._access.route(MEMBER_SUBSCRIPTIONS_PATH, self.subscriptions, "POST",
                                   REGISTRY)]

    async def subscriptions(self, request: Request) -> Response:
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("table"), str):
            raise BadRequest('invalid_argument: the body is {"table": ..., "where": {...}}')
        where = body.get("where", {})
        if not isinstance(where, dict):
            raise BadRequest("invalid_argument: where maps columns to values")
        try:
            sub = self._subscribe(body["table"], where)
        except ValueError as e:
            raise BadRequest(f"invalid_argument: {e}") from None
        return StreamingResponse(self._stream(sub), media_type="application/x-ndjson")

    async def _stream(self, sub: Subscription) -> AsyncIterator[bytes]:
        with sub:
            sent = 0
            if sub.initial_count == 0:
                yield _line({"eoq": {"rows": 0}})
            while True:
                try:
                    change = await within(anext(sub), self._heartbeat)
                except TimeoutError:
                    yield _line({"heartbeat": {}})
                    continue
                except StopAsyncIteration:
                    return
                except FeedLagged as e:
                    yield _line({"error": f"subscription lagged: {e}", "status": "lagged"})
                    return
                if change.kind == "initial":
                    yield _line({"row": change.to_json()})
                    sent += 1
                    if sent == sub.initial_count:
                        yield _line({"eoq": {"rows": sent}})
                else:
                    yield _line({"change": change.to_json()})


class RegistryQueries:
    def __init__(self, view_path: Path | str, state_dir: Path | str, *, authorize: Authorize,
                 limits: QueryLimits | None = None) -> None:
        """``view_path``: the replica's SQLite file (``View``); ``state_dir``: where the
        subscriptions keep their own file; ``authorize``: whether a request may use the API."""
        self.limits = limits or QueryLimits()
        self.reader = Reader(view_path, self.limits)
        self.subscriptions = LiveSubscriptions(self.reader, Path(state_dir), self.limits)
        self._authorize = authorize
        self._turns = asyncio.Semaphore(self.limits.concurrent)

    async def start(self) -> None:
        await self.subscriptions.start()

    async def stop(self) -> None:
        await self.subscriptions.stop()

    def changed(self, tables: Iterable[str]) -> None:
        """These replicated tables changed: the subscriptions reading them re-run."""
        self.subscriptions.changed(tables)

    def routes(self) -> list[BaseRoute]:
        return [Route(QUERIES_PATH, self._guard(self.query), methods=["POST"]),
                Route(SUBSCRIPTIONS_PATH, self._guard(self.subscribe), methods=["POST"]),
                Route(SUBSCRIPTIONS_PATH + "/{id}", self._guard(self.resume), methods=["GET"])]

    # ── handlers ─────────────────────────────────────────────────────────────

    async def query(self, request: Request) -> Response:
        asked = await _statement(request)
        async with self._turns:
            result = await asyncio.to_thread(self.reader.run, asked)
        return StreamingResponse(_pieces(_answer(result)), media_type=MEDIA_TYPE)

    async def subscribe(self, request: Request) -> Response:
        asked = await _statement(request)
        async with self._turns:
            opened = await self.subscriptions.subscribe(asked)
        return self._stream(opened, self._rows_then_changes(opened))

    async def resume(self, request: Request) -> Response:
        sub = request.path_params["id"]
        seen = request.query_params.get("from")
        if seen is None or seen == "":
            opened = await self.subscriptions.current(sub)
            return self._stream(opened, self._rows_then_changes(opened))
        if not seen.isdigit():
            raise BadRequest("invalid_argument: from is the id of the last change seen "
                             "(an integer, 0 or more)")
        await self.subscriptions.check_resume(sub, int(seen))
        return StreamingResponse(_pieces(self._changes(sub, int(seen))), media_type=MEDIA_TYPE,
                                 headers={QUERY_ID_HEADER: sub})

    # ── inside ───────────────────────────────────────────────────────────────

    def _guard(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if not self._authorize(request):
                raise Unauthorized("unauthenticated: the registry's query API takes the "
                                   "cluster's admin token (Authorization: Bearer ...)")
            return await handler(request)

        async def route(request: Request) -> Response:
            return await handle_errors(request, guarded)

        return route

    def _stream(self, opened: Opened, lines: AsyncIterator[bytes]) -> Response:
        return StreamingResponse(_pieces(lines), media_type=MEDIA_TYPE,
                                 headers={QUERY_ID_HEADER: opened.id})

    async def _rows_then_changes(self, opened: Opened) -> AsyncIterator[bytes]:
        yield columns_line(opened.columns)
        for row in opened.rows:
            yield row_line(row.number, row.values)
        yield eoq_line(opened.seconds, opened.change_id)
        async for line in self._changes(opened.id, opened.change_id):
            yield line

    async def _changes(self, sub: str, seen: int) -> AsyncIterator[bytes]:
        async for item in self.subscriptions.follow(sub, seen):
            if isinstance(item, Ended):
                yield error_line(item.message)
                return
            change = item.change
            yield change_line(change.kind, change.number, change.values, item.id)


async def _statement(request: Request) -> Statement:
    try:
        return statement(await read_json(request))
    except ValueError as exc:
        raise BadRequest(f"invalid_argument: {exc}") from None


async def _answer(result: Result) -> AsyncIterator[bytes]:
    yield columns_line(result.columns)
    for number, values in enumerate(result.rows, start=1):
        yield row_line(number, values)
    yield error_line(result.stopped) if result.stopped else eoq_line(result.seconds)


async def _pieces(lines: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Lines gathered into pieces of about ``CHUNK`` bytes while more are ready at once; a
    line that waits for news (a subscription's change) goes out without waiting."""
    piece = bytearray()
    async for line in lines:
        piece += line
        if len(piece) >= CHUNK or line.startswith((b'{"eoq"', b'{"change"', b'{"error"')):
            yield bytes(piece)
            piece.clear()
    if piece:
        yield bytes(piece)
