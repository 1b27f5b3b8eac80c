"""Peer sync's HTTP routes, mounted on the daemon's own server; cluster members only.

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

(The members' subscription route, ``POST /v1/registry/subscriptions``, is the public
API's, beside the users' subscriptions: ``registry/api/routes.py``.)

Cluster members only: the daemon's listener is mutual TLS, and each route
checks the caller's role (``bodega.runtime.tls.core.access``, the ``registry``
rules).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from bodega.model.errors import BadRequest
from bodega.model.json import JsonObject
from bodega.registry.api.subscriptions import Subscription
from bodega.registry.membership.core.messages import DecodeError
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
from bodega.wire.transport.http import read_json
from bodega.wire.transport.peer_access import PeerAccess

SYNC_PATH = "/v1/registry/sync"
DIGEST_PATH = "/v1/registry/digest"

Serve = Callable[[SyncRequest], SyncReply]
Compare = Callable[[DigestRequest], DigestReply]
# (table, where): ``where`` as the client sent it, checked by the subscriber.
Subscribe = Callable[[str, Mapping[str, object]], Subscription]


def _line(value: JsonObject) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


class RegistryHttp:
    def __init__(self, *, access: PeerAccess, serve: Serve, compare: Compare,
                 metrics: ReplicationMetrics) -> None:
        self._access = access
        self._serve = serve
        self._compare = compare
        self._metrics = metrics

    def routes(self) -> list[BaseRoute]:
        return [self._access.route(path, handler, "POST", REGISTRY)
                for path, handler in ((SYNC_PATH, self.sync), (DIGEST_PATH, self.digest))]

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
