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

import aiohttp

from bodega.model.json import JsonObject
from bodega.registry.api.routes import MEMBER_SUBSCRIPTIONS_PATH
from bodega.registry.api.subscriptions import RowChange
from bodega.registry.membership.core.messages import DecodeError
from bodega.registry.membership.feed import FeedLagged
from bodega.registry.replication.core.exchange import DigestRequest, SyncReply, SyncRequest
from bodega.registry.sync.core.rowwire import (
    decode_digest_reply,
    decode_reply,
    digest_request_json,
    request_json,
)
from bodega.registry.sync.routes import DIGEST_PATH, SYNC_PATH
from bodega.wire.transport.aiohttp_transport import session
from bodega.wire.transport.seam import lines

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


class SyncClient:
    """``tls``: the node's client context (its certificate, the cluster CA); None: plain.

    ``timeout`` bounds making a connection and each wait for the peer's next bytes, not
    the whole pull: a large reply that keeps coming is not cut off."""

    def __init__(self, tls: ssl.SSLContext | None, *, timeout: float = 5.0) -> None:
        # A node pulls from a random peer about once a second, so it comes back to the same
        # peer only every N seconds or so in a cluster of N nodes. A pool whose idle
        # connections lived 5 s opened a new TCP and TLS connection on almost every pull of
        # a 20-worker `bodega up`, on both sides; the shared session keeps them 60 s, under
        # the 75 s servers keep them (runtime/serve.py), for every peer.
        self._http = session(ssl=tls)
        self._timeout = aiohttp.ClientTimeout(total=None, connect=timeout, sock_read=timeout)

    async def aclose(self) -> None:
        await self._http.close()

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
            async with self._http.post(
                    url.rstrip("/") + path, data=body, timeout=self._timeout,
                    headers={"content-type": "application/json"}) as response:
                if response.status != 200:
                    text = (await response.read())[:200].decode(errors="replace")
                    raise SyncFailed(f"{url}: HTTP {response.status}: {text}")
                if (response.content_length or 0) > MAX_REPLY:  # refused before it is read
                    raise SyncFailed(f"{url}: reply over {MAX_REPLY} bytes")
                content = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise SyncFailed(f"{url}: {e!r}") from e
        if len(content) > MAX_REPLY:
            raise SyncFailed(f"{url}: reply over {MAX_REPLY} bytes")
        return content


async def subscribe_http(url: str, tls: ssl.SSLContext | None, table: str, *,
                         timeout: float = 30.0,
                         **where: str | int) -> AsyncGenerator[RowChange, None]:
    """The rows and changes of a subscription served by the node at ``url``, asked with
    the client context ``tls`` (a certificate of the cluster's; None: a plain listener).
    ``timeout`` bounds making the connection; the stream itself may be quiet for as long
    as nothing changes.

    Raises ``FeedLagged`` if the server cut the stream because we fell behind.
    """
    async with session(1, ssl=tls) as http, http.post(
            url.rstrip("/") + MEMBER_SUBSCRIPTIONS_PATH, json={"table": table, "where": where},
            timeout=aiohttp.ClientTimeout(total=None, connect=timeout)) as response:
        if response.status != 200:
            text = (await response.read())[:200].decode(errors="replace")
            raise SyncFailed(f"{url}: HTTP {response.status}: {text}")
        async for line in lines(response.content.iter_any()):
            if not line:
                continue
            message: JsonObject = json.loads(line)
            if "row" in message:
                yield _change(message["row"])
            elif "change" in message:
                yield _change(message["change"])
            elif message.get("status") == "lagged":
                raise FeedLagged(str(message.get("error")))


def _change(doc: JsonObject) -> RowChange:
    return RowChange(doc["kind"], doc["table"], doc["key"], doc["doc"])
