"""The registry's HTTP routes, mounted on the daemon's own server; cluster members only.

``POST /v1/registry/digest``: the first step of anti-entropy. The body is
the caller's digest (``ledger.py``: one 64-bit hash per bucket of origins);
the reply names the buckets whose digests differ from ours.

``POST /v1/registry/sync``: the second step. The body is the caller's known
versions per origin of those buckets (every origin when it has no
``buckets``); the reply carries the rows it is missing (bounded),
the spans vouched for, and the resets. Sync runs over TCP rather than in
datagrams because a catch-up can be megabytes (a node back from a long
partition, or new): TCP gives flow control, ordering and no size limit,
and a failed pull simply retries with another peer next round.

``POST /v1/registry/subscriptions``: ``{"table": "machines", "where":
{"app": "web"}}`` streams NDJSON: ``{"row": {...}}`` per current row, then
``{"eoq": {"rows": n}}``, then ``{"change": {...}}`` per change, with a
``{"heartbeat": {}}`` line when idle so clients notice a dead connection.
A consumer that falls behind gets ``{"error": ..., "status": "lagged"}``
and the stream ends (re-subscribe for a fresh snapshot).

Cluster members only: the daemon's listener is mutual TLS, and each route
checks the caller's role (``bodega.runtime.tls.core.access``, the ``registry``
rules).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute

from bodega.model.errors import BadRequest
from bodega.model.json import JsonObject
from bodega.registry.api.subscriptions import Subscription
from bodega.registry.membership.core.messages import DecodeError
from bodega.registry.membership.feed import FeedLagged
from bodega.registry.replication.core.exchange import (
    DigestReply,
    DigestRequest,
    SyncReply,
    SyncRequest,
)
from bodega.registry.replication.metrics import ReplicationMetrics
from bodega.registry.sync.core.rowwire import (
    decode_digest_request,
    decode_request,
    digest_reply_json,
    reply_json,
)
from bodega.runtime.tls.core.access import REGISTRY
from bodega.runtime.waits import within
from bodega.wire.http import read_json
from bodega.wire.peer_access import PeerAccess

SYNC_PATH = "/v1/registry/sync"
DIGEST_PATH = "/v1/registry/digest"
SUBSCRIPTIONS_PATH = "/v1/registry/subscriptions"
HEARTBEAT = 15.0

Serve = Callable[[SyncRequest], SyncReply]
Compare = Callable[[DigestRequest], DigestReply]
# (table, where): ``where`` as the client sent it, checked by the subscriber.
Subscribe = Callable[[str, Mapping[str, object]], Subscription]


def _line(value: JsonObject) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


class RegistryHttp:
    def __init__(self, *, access: PeerAccess, serve: Serve, compare: Compare,
                 subscribe: Subscribe, metrics: ReplicationMetrics,
                 heartbeat: float = HEARTBEAT) -> None:
        self._access = access
        self._serve = serve
        self._compare = compare
        self._subscribe = subscribe
        self._metrics = metrics
        self._heartbeat = heartbeat

    def routes(self) -> list[BaseRoute]:
        return [self._access.route(path, handler, "POST", REGISTRY)
                for path, handler in ((SYNC_PATH, self.sync), (DIGEST_PATH, self.digest),
                                      (SUBSCRIPTIONS_PATH, self.subscriptions))]

    async def sync(self, request: Request) -> Response:
        body = await read_json(request)
        try:
            sync_request = decode_request(body)
        except DecodeError as e:
            raise BadRequest(f"invalid_argument: {e}") from None
        reply = json.dumps(reply_json(self._serve(sync_request)), separators=(",", ":")).encode()
        self._metrics.served.inc()
        return Response(reply, media_type="application/json")

    async def digest(self, request: Request) -> Response:
        body = await read_json(request)
        try:
            digest_request = decode_digest_request(body)
        except DecodeError as e:
            raise BadRequest(f"invalid_argument: {e}") from None
        reply = digest_reply_json(self._compare(digest_request))
        return Response(json.dumps(reply, separators=(",", ":")).encode(),
                        media_type="application/json")

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

