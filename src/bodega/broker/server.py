"""The broker's public HTTP API: the Fly Machines API v1 subset, plus bodega's additions.

Every route but health and the OpenAPI document needs a token; every answer
carries a ``fly-request-id``; every error is ``{"error", "status"}`` with the
code the Machines API uses. This module assembles the app: the open routes,
then the route tables of each room (``apps/routes.py``, ``machines/routes.py``,
``machines/leases.py``, ``machines/logs.py``, ``volumes/routes.py``,
``secrets/routes.py``, ``platform/routes.py``, ``trust/key_routes.py``, the releases...),
each route wrapped by ``_route`` (authentication, readiness, metrics); last, the
WebSockets of a machine's port forward and console (``machines/forward.py``,
``machines/console.py``), wrapped the same way by
``_socket_route``, its refusals answered before the upgrade. Handlers are thin:
they parse, check the caller may touch the app, and hand over to the room's service
(``Machines``, ``MachineCreate``, ``Volumes``, ``Apps``, ``Platform``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from bodega.broker.apps.releases import release_routes
from bodega.broker.apps.routes import app_routes
from bodega.broker.auth.core.oidc import OidcKey
from bodega.broker.auth.routes import token_routes, well_known_routes
from bodega.broker.auth.tokens import Principal, Tokens
from bodega.broker.autoscale.routes import AutoscaleSettings, autoscale_routes
from bodega.broker.certificates.routes import certificate_routes
from bodega.broker.certificates.store import AppCertificates
from bodega.broker.machines.console import console_routes
from bodega.broker.machines.create import MachineCreate
from bodega.broker.machines.forward import SocketHandler, forward_routes
from bodega.broker.machines.leases import lease_routes
from bodega.broker.machines.logs import log_routes
from bodega.broker.machines.routes import machine_routes
from bodega.broker.machines.service import Machines
from bodega.broker.metrics import BrokerMetrics
from bodega.broker.openapi import docs_page, openapi_document
from bodega.broker.platform.routes import platform_routes
from bodega.broker.platform.service import Platform
from bodega.broker.prometheus.routes import prometheus_routes
from bodega.broker.prometheus.store import MetricsStore
from bodega.broker.secrets.key_routes import secret_key_routes
from bodega.broker.secrets.keys import AppSecretKeys
from bodega.broker.secrets.routes import secret_routes
from bodega.broker.secrets.store import AppSecrets
from bodega.broker.trust.joining import join_token_routes
from bodega.broker.trust.key_routes import key_routes
from bodega.broker.view.apps import Apps
from bodega.broker.view.readiness import RETRY_AFTER, Gate
from bodega.broker.volumes.routes import volume_routes
from bodega.broker.volumes.service import Volumes
from bodega.model.errors import Unavailable
from bodega.model.ids import new_ulid
from bodega.wire.public.cluster_info import ClusterInfo
from bodega.wire.transport.http import (
    RouteMaker,
    handle_errors,
    handle_socket_errors,
    json_response,
    not_found_app_handler,
    refuse_socket,
)
from bodega.wire.transport.routing import grouped

if TYPE_CHECKING:  # the registry loads only for a broker that runs a node
    from bodega.broker.trust.join_book import JoinStore
    from bodega.registry.gossipkeys import GossipKeys

REQUEST_ID = "fly-request-id"

Handler = Callable[[Request, Principal], Awaitable[Response]]


class BrokerApi:
    def __init__(self, *, tokens: Tokens, apps: Apps, machines: Machines,
                 creation: MachineCreate, volumes: Volumes,
                 platform: Platform, metrics: BrokerMetrics, name: str, gate: Gate,
                 secrets: AppSecrets | None = None, info: ClusterInfo | None = None,
                 secret_keys: AppSecretKeys | None = None,
                 oidc_key: OidcKey | None = None,
                 more: Callable[[RouteMaker], list[Route]] | None = None,
                 keys: GossipKeys | None = None, joins: JoinStore | None = None,
                 certificates: AppCertificates | None = None,
                 metrics_store: MetricsStore | None = None) -> None:
        self.tokens = tokens
        self.apps = apps
        self.machines = machines
        self.creation = creation
        self.volumes = volumes
        self.platform = platform
        self.metrics = metrics
        self.name = name
        self.gate = gate
        self.secrets = secrets
        self.secret_keys = secret_keys
        self.oidc_key = oidc_key
        self.certificates = certificates
        self.info = info
        self.more = more  # another area's routes (the jobs' /sched)
        self.keys = keys
        self.joins = joins
        self.metrics_store = metrics_store

    def app(self) -> Starlette:
        r = self._route
        plain_forward, socket_forward = forward_routes(r, self._socket_route, self.machines)
        plain_console, socket_console = console_routes(r, self._socket_route, self.machines)
        routes: list[BaseRoute] = [
            Route("/v1/health", self.health, methods=["GET"]),
            Route("/openapi.json", self.openapi, methods=["GET"]),
            Route("/v1/openapi.json", self.openapi, methods=["GET"]),
            Route("/docs", self.docs, methods=["GET"]),
            *(well_known_routes(self.oidc_key) if self.oidc_key is not None else []),
            r("/metrics", self.prometheus, "GET", gated=False),
            *app_routes(r, apps=self.apps, machines=self.machines, volumes=self.volumes,
                        tokens=self.tokens),
            *release_routes(r, self.apps.catalog, self.apps),  # a bodega extension
            *autoscale_routes(r, AutoscaleSettings(self.apps.catalog, self.apps)),  # too
            *(secret_routes(r, self.secrets) if self.secrets is not None else []),
            *(secret_key_routes(r, self.secret_keys) if self.secret_keys is not None else []),
            *(token_routes(r, self.tokens, self.apps, self.apps.catalog, self.oidc_key)
              if self.oidc_key is not None else []),
            *certificate_routes(r, self.certificates),  # 409s on a broker with no certs key
            *log_routes(r, self.machines),
            *machine_routes(r, self.machines, self.creation),
            *plain_forward,  # a request without the upgrade is told what it needs
            *plain_console,
            *lease_routes(r, self.machines),
            *volume_routes(r, self.volumes),
            *platform_routes(r, self.platform, self.info),
            *(self.more(r) if self.more is not None else []),
            *(key_routes(r, self.keys) if self.keys is not None else []),
            *join_token_routes(r, self.joins),  # 404s on a broker that lets no host join
            # PromQL per org: this host's store, else another server host's; 503 with none.
            *prometheus_routes(r, self.apps.catalog, self.metrics_store or MetricsStore(None)),
            # WebSockets last: the routes before them are grouped by their count of segments
            *socket_forward,
            *socket_console,
        ]
        return Starlette(routes=grouped(routes), exception_handlers={404: not_found_app_handler,
                                                            405: not_found_app_handler})

    def _route(self, path: str, handler: Handler, method: str, *, gated: bool = True) -> Route:
        """An authenticated route; ``gated`` ones answer 503 until the broker is ready (their
        answers come from the view: before it has heard from the cluster, a create would be
        told there is no room, an app that exists would be "not found")."""
        label = f"{method} {path}"

        async def authed(request: Request) -> Response:
            principal = self.tokens.authenticate(request)
            app = request.path_params.get("app")
            if app is not None:
                principal.check(app)
            principal.check_path(request.url.path)
            return await handler(request, principal)

        async def endpoint(request: Request) -> Response:
            if gated and not self.gate.state.ready:
                response = self._not_ready()
            else:
                response = await handle_errors(request, authed)
            response.headers[REQUEST_ID] = new_ulid()
            self.metrics.requests.labels(label, str(response.status_code)).inc()
            return response

        return Route(path, endpoint, methods=[method], name=label)

    def _socket_route(self, path: str, handler: SocketHandler) -> WebSocketRoute:
        """An authenticated WebSocket route, checked as ``_route`` checks a request (gated
        too); every refusal is an HTTP answer in the error shape, before the upgrade."""
        label = f"GET {path}"

        async def authed(socket: WebSocket) -> None:
            principal = self.tokens.authenticate(socket)
            app = socket.path_params.get("app")
            if app is not None:
                principal.check(app)
            principal.check_path(socket.url.path)
            await handler(socket, principal)

        async def endpoint(socket: WebSocket) -> None:
            if not self.gate.state.ready:
                refusal = Unavailable(self.gate.state.why)
                refusal.retry_after = float(RETRY_AFTER)
                status = await refuse_socket(socket, refusal)
            else:
                status = await handle_socket_errors(socket, authed)
            self.metrics.requests.labels(label, str(status)).inc()

        return WebSocketRoute(path, endpoint, name=label)

    # -- open routes, and the metrics -------------------------------------------------------
    def _not_ready(self, **extra: Any) -> Response:
        return json_response({**extra, "error": self.gate.state.why, "status": "unavailable"},
                             503, headers={"Retry-After": RETRY_AFTER})

    async def health(self, request: Request) -> Response:
        if self.gate.state.ready:
            return json_response({"ok": True, "ready": True, "name": self.name})
        return self._not_ready(ok=False, ready=False, name=self.name)

    async def openapi(self, request: Request) -> Response:
        return json_response(openapi_document())

    async def docs(self, request: Request) -> Response:
        return Response(docs_page(), media_type="text/html")

    async def prometheus(self, request: Request, who: Principal) -> Response:
        who.check_admin("metrics")
        return Response(generate_latest(self.metrics.registry),
                        media_type="text/plain; version=0.0.4")
