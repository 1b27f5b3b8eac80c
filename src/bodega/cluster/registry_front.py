"""The cluster image registry's door: TLS from the cluster CA, and who may push or pull.

docker-registry (CNCF distribution) serves on a Unix socket in the registry's
0700 data dir; this front is what the network reaches. It serves HTTPS with
the registry's certificate from the cluster CA (swapped for a renewed one in
place: new handshakes present it, no restart), asks clients for a
certificate without requiring one, and lets a request through by
``access.image_registry_allows``:

- a push (any method but GET and HEAD) needs an admin token, as the password
  of HTTP basic auth (what buildah and skopeo send after the 401's ``Basic``
  challenge): ``bodega build`` and ``bodega deploy`` send the token of the
  cluster they talk to;
- a pull needs that, or a worker's certificate from the cluster CA (mutual
  TLS): workers pull with the identity they already hold, and no password is
  handed out for them.

A wrong token spends the caller's address's budget, as at the Machines API
(``broker/auth/core/limit.py``): past it, 429 with ``Retry-After``. Refusals are
in the distribution protocol's error shape (``{"errors": [{"code": ...}]}``),
which registry clients read. Everything let through is relayed as it comes,
both ways, without buffering a layer: the body streams to the socket and the
answer streams back.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import yarl
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from bodega.broker.auth.core.limit import FailureLimiter
from bodega.proxy.http1 import HOP_BY_HOP as ONE_HOP
from bodega.runtime.tls.core.access import IMAGE_PULLERS, image_registry_allows
from bodega.wire.transport.peer_access import peer_of

log = logging.getLogger("bodega.cluster.registry")

CHUNK = 1 << 16
REALM = 'Basic realm="bodega image registry"'
DISTRIBUTION = {"Docker-Distribution-Api-Version": "registry/2.0"}
# Meant for one connection only (RFC 9110 7.6.1: the proxy's list), or re-made by whoever
# sends the message on (its framing, its host).
HOP_BY_HOP = (frozenset(name.decode() for name in ONE_HOP)
              | {"transfer-encoding", "host"})
FRONTS_OWN = frozenset({"date", "server"})  # the front's server writes its own
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


def presented_token(authorization: str) -> str | None:
    """The token an ``Authorization`` header carries: basic auth's password (the user name
    is not looked at) or a bearer token; None for anything else."""
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    _, colon, password = decoded.partition(":")
    return password if colon and password else None


def refusal(status: int, code: str, message: str, **headers: str) -> Response:
    body = json.dumps({"errors": [{"code": code, "message": message, "detail": None}]})
    return Response(body, status, media_type="application/json",
                    headers={**DISTRIBUTION, **headers})


class RegistryFront:
    def __init__(self, socket_path: Path, cluster: str, admin_hashes: tuple[bytes, ...],
                 limiter: FailureLimiter | None = None) -> None:
        """``cluster``: the trust domain a puller's certificate must name; ``admin_hashes``:
        the SHA-256 of each admin token."""
        self.socket_path = socket_path
        self.cluster = cluster
        self.admin_hashes = admin_hashes
        self.limiter = limiter or FailureLimiter()
        self._session: aiohttp.ClientSession | None = None

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.relay, methods=METHODS)])

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _admin(self, token: str) -> bool:
        digest = hashlib.sha256(token.encode()).digest()
        return any(hmac.compare_digest(digest, known) for known in self.admin_hashes)

    def _role(self, request: Request) -> str | None:
        peer = peer_of(request)
        who = peer.identity if peer is not None else None
        return who.role if who is not None and who.cluster == self.cluster else None

    def door(self, request: Request) -> Response | None:
        """None to let the request through, else the refusal to answer."""
        role = self._role(request)
        header = request.headers.get("authorization")
        token = presented_token(header) if header else None
        admin = token is not None and self._admin(token)
        if image_registry_allows(request.method, role, admin):
            return None
        if header is not None:  # a credential that opens nothing: counted against its address
            address = request.client.host if request.client else "?"
            now = time.monotonic()
            wait = self.limiter.retry_after(address, now)
            if wait is not None:
                return refusal(429, "TOOMANYREQUESTS", "too many failed authentications "
                               "from this address", **{"Retry-After": str(max(1, round(wait)))})
            self.limiter.failed(address, now)
            return refusal(401, "UNAUTHORIZED", "the token is not one of this cluster's admin "
                           "tokens", **{"WWW-Authenticate": REALM})
        if role in IMAGE_PULLERS:
            return refusal(403, "DENIED", f"a {role}'s certificate may pull, not push: a push "
                           "needs the cluster's admin token")
        if role is not None:
            return refusal(403, "DENIED", f"a {role}'s certificate opens nothing here: the "
                           "cluster's admin token pushes and pulls, a worker's certificate "
                           "pulls")
        return refusal(401, "UNAUTHORIZED", "authentication required: the cluster's admin "
                       "token (a worker's certificate to pull)", **{"WWW-Authenticate": REALM})

    def _upstream(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=str(self.socket_path)),
                auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None, connect=10))
        return self._session

    async def relay(self, request: Request) -> Response:
        refused = self.door(request)
        if refused is not None:
            return refused
        # The raw path and query, as sent: an upload's state rides in its query, encoded.
        target = request.scope["raw_path"].decode("latin-1")
        if request.scope["query_string"]:
            target += "?" + request.scope["query_string"].decode("latin-1")
        headers = [(k, v) for k, v in request.headers.items()
                   if k.lower() not in HOP_BY_HOP and k.lower() != "authorization"]
        has_body = ("content-length" in request.headers and request.headers["content-length"]
                    != "0") or "transfer-encoding" in request.headers
        try:
            answer = await self._upstream().request(
                request.method, yarl.URL("http://registry" + target, encoded=True),
                headers=headers, data=_body(request) if has_body else None,
                allow_redirects=False)
        except aiohttp.ClientError as exc:
            log.warning("the registry behind the front did not answer: %s", exc)
            return refusal(503, "UNAVAILABLE", "the registry is not answering; try again")
        kept = {k: v for k, v in answer.headers.items()
                if k.lower() not in HOP_BY_HOP | FRONTS_OWN}
        return StreamingResponse(_chunks(answer), answer.status, headers=kept,
                                 background=BackgroundTask(answer.release))


async def _body(request: Request) -> AsyncIterator[bytes]:
    async for chunk in request.stream():
        if chunk:
            yield chunk


async def _chunks(answer: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    async for chunk in answer.content.iter_chunked(CHUNK):
        yield chunk
