"""The second door of an internal listener: the caller's role must be one its route allows.

The TLS handshake (``bodega.runtime.tls.gate``) already refused anyone
without a certificate from the cluster's CA, and left the caller's identity
in the request's scope. ``PeerAccess.route`` builds a route that looks up its
rule in ``bodega.runtime.tls.core.access`` once, when the listener is built (a
route with no rule cannot be built), and on each request answers 403 in the
error shape, counted, when the caller's role is not one of the rule's;
``socket_route`` does the same for a WebSocket route (a machine's port forward), its
refusal answered before the upgrade. On a
plaintext listener (``--internal-tls off``, for measurement only) there is no
identity to check and every route is open.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from bodega.model.errors import Forbidden
from bodega.runtime.tls.contexts import InternalTls, Peer
from bodega.runtime.tls.core.access import roles_for
from bodega.runtime.tls.core.identity import Identity
from bodega.runtime.tls.gate import PEER
from bodega.wire.transport.http import handle_errors, handle_socket_errors

Handler = Callable[[Request], Awaitable[Response]]
SocketHandler = Callable[[WebSocket], Awaitable[None]]


def peer_of(request: HTTPConnection) -> Peer | None:
    """Who called, as the certificate it presented in the handshake says."""
    state = request.scope.get("state") or {}
    peer = state.get(PEER)
    return peer if isinstance(peer, Peer) else None


class PeerAccess:
    def __init__(self, listener: str, tls: InternalTls | None) -> None:
        self.listener = listener
        self.tls = tls

    def check(self, request: HTTPConnection, roles: frozenset[str], what: str
              ) -> Identity | None:
        """The caller, if its role may call ``what``; ``Forbidden`` otherwise."""
        if self.tls is None:
            return None
        peer = peer_of(request)
        who = peer.identity if peer is not None else None
        if who is None or who.role not in roles:
            self.tls.refused("role")
            caller = f"a {who.role}" if who is not None else "a caller with no identity"
            raise Forbidden(f"permission_denied: {caller} may not call {what} here")
        return who

    def guard(self, path: str, method: str, handler: Handler, listener: str | None = None
              ) -> Handler:
        """``handler`` behind the rule for ``method path`` (on ``listener``, default ours),
        every failure in the error shape."""
        where = listener or self.listener
        roles = roles_for(where, method, path)
        what = f"{method} {path}"

        async def checked(request: Request) -> Response:
            self.check(request, roles, what)
            return await handler(request)

        async def endpoint(request: Request) -> Response:
            return await handle_errors(request, checked)

        return endpoint

    def route(self, path: str, handler: Handler, method: str,
              listener: str | None = None) -> Route:
        return Route(path, self.guard(path, method, handler, listener), methods=[method],
                     name=f"{method} {path}")

    def socket_route(self, path: str, handler: SocketHandler,
                     listener: str | None = None) -> WebSocketRoute:
        """A WebSocket route behind the rule for ``GET path`` (a WebSocket's upgrade is a
        GET); a refusal is an HTTP answer in the error shape, before the upgrade."""
        roles = roles_for(listener or self.listener, "GET", path)
        what = f"GET {path}"

        async def checked(socket: WebSocket) -> None:
            self.check(socket, roles, what)
            await handler(socket)

        async def endpoint(socket: WebSocket) -> None:
            await handle_socket_errors(socket, checked)

        return WebSocketRoute(path, endpoint, name=what)
