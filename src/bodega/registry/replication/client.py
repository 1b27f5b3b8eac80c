"""Clients of the registry's HTTP routes: anti-entropy pulls and subscription streams.

``SyncClient`` is what a node uses to pull from a peer; ``subscribe_http``
is for processes that do not embed a node (tools, tests) and want a
query's rows and changes from one that does.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import httpx

from bodega.registry.feed import FeedLagged
from bodega.registry.membership.messages import DecodeError
from bodega.registry.replication.exchange import DigestRequest, SyncReply, SyncRequest
from bodega.registry.replication.httpapi import DIGEST_PATH, SUBSCRIPTIONS_PATH, SYNC_PATH
from bodega.registry.replication.rowwire import (
    decode_digest_reply,
    decode_reply,
    digest_request_json,
    request_json,
)
from bodega.registry.replication.subscriptions import RowChange

MAX_REPLY = 64 << 20  # a reset of a large origin is big, but never this big


class SyncFailed(Exception):
    """A pull that did not complete: the peer was unreachable, refused, or answered nonsense."""


@dataclass(frozen=True)
class Pulled:
    reply: SyncReply
    sent: int  # request body bytes
    received: int  # reply body bytes


@dataclass(frozen=True)
class Compared:
    differ: tuple[int, ...]
    sent: int
    received: int


KEPT_PEERS = 256  # idle connections kept, one per peer pulled from
KEEPALIVE_SECONDS = 60.0


class SyncClient:
    """``tls``: the node's client context (its certificate, the cluster CA); None: plain."""

    def __init__(self, tls: ssl.SSLContext | None, *, timeout: float = 5.0) -> None:
        # A node pulls from a random peer about once a second, so it comes back to the same
        # peer only every N seconds or so in a cluster of N nodes. A pool that keeps 16
        # connections, idle for at most 5 s (httpx's default), opened a new TCP and TLS
        # connection on almost every pull of a 20-worker `bodega up`, on both sides. Idle
        # connections now live 60 s, under the 75 s servers keep them (runtime/serve.py).
        self._http = httpx.AsyncClient(
            timeout=timeout, verify=tls if tls is not None else True,
            limits=httpx.Limits(max_keepalive_connections=KEPT_PEERS,
                                keepalive_expiry=KEEPALIVE_SECONDS))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def compare(self, url: str, request: DigestRequest) -> Compared:
        """The buckets whose versions differ between the peer at ``url`` and us."""
        body = json.dumps(digest_request_json(request), separators=(",", ":")).encode()
        content = await self._post(url, DIGEST_PATH, body)
        try:
            reply = decode_digest_reply(json.loads(content))
        except (ValueError, DecodeError, RecursionError) as e:
            raise SyncFailed(f"{url}: bad digest reply: {e}") from e
        return Compared(reply.differ, len(body), len(content))

    async def pull(self, url: str, request: SyncRequest) -> Pulled:
        body = json.dumps(request_json(request), separators=(",", ":")).encode()
        content = await self._post(url, SYNC_PATH, body)
        try:
            reply = decode_reply(json.loads(content))
        except (ValueError, DecodeError, RecursionError) as e:
            raise SyncFailed(f"{url}: bad reply: {e}") from e
        return Pulled(reply, len(body), len(content))

    async def _post(self, url: str, path: str, body: bytes) -> bytes:
        try:
            response = await self._http.post(
                url.rstrip("/") + path, content=body,
                headers={"content-type": "application/json"})
        except httpx.HTTPError as e:
            raise SyncFailed(f"{url}: {e!r}") from e
        if response.status_code != 200:
            raise SyncFailed(f"{url}: HTTP {response.status_code}: {response.text[:200]}")
        if len(response.content) > MAX_REPLY:
            raise SyncFailed(f"{url}: reply over {MAX_REPLY} bytes")
        return response.content


async def subscribe_http(url: str, tls: ssl.SSLContext | None, table: str, *,
                         timeout: float = 30.0,
                         **where: str | int) -> AsyncGenerator[RowChange, None]:
    """The rows and changes of a subscription served by the node at ``url``, asked with
    the client context ``tls`` (a certificate of the cluster's; None: a plain listener).

    Raises ``FeedLagged`` if the server cut the stream because we fell behind.
    """
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout, read=None),
                                 verify=tls if tls is not None else True) as http, \
            http.stream("POST", url.rstrip("/") + SUBSCRIPTIONS_PATH,
                        json={"table": table, "where": where}) as response:
        if response.status_code != 200:
            await response.aread()
            raise SyncFailed(f"{url}: HTTP {response.status_code}: {response.text[:200]}")
        async for line in response.aiter_lines():
            if not line:
                continue
            message: dict[str, Any] = json.loads(line)
            if "row" in message:
                yield _change(message["row"])
            elif "change" in message:
                yield _change(message["change"])
            elif message.get("status") == "lagged":
                raise FeedLagged(str(message.get("error")))


def _change(doc: dict[str, Any]) -> RowChange:
    return RowChange(doc["kind"], doc["table"], doc["key"], doc["doc"])
