"""The broker's public HTTP API: the Fly Machines API v1 subset, plus bodega's additions.

Every route but health and the OpenAPI document needs a token; every answer
carries a ``fly-request-id``; every error is ``{"error", "status"}`` with the
code the Machines API uses. Handlers are thin: they parse, check the caller
may touch the app, and hand over to ``Machines``, ``Volumes``, ``Apps`` or
``Platform``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from prometheus_client import generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.app_delete import AppDelete
from bodega.broker.apps import Apps
from bodega.broker.auth import Principal, Tokens
from bodega.broker.ip_assignments import IpAssignments
from bodega.broker.log_routes import log_routes
from bodega.broker.machines import Machines
from bodega.broker.metrics import BrokerMetrics
from bodega.broker.openapi import docs_page, openapi_document
from bodega.broker.org_machines import page, parse_query
from bodega.broker.platform import Platform
from bodega.broker.platform_routes import platform_routes
from bodega.broker.readiness import RETRY_AFTER, Gate
from bodega.broker.releases import TABLE as RELEASES
from bodega.broker.releases import app_status, release_routes
from bodega.broker.secret_routes import secret_routes
from bodega.broker.secrets import AppSecrets
from bodega.broker.volume_routes import volume_routes
from bodega.broker.volumes import Volumes
from bodega.model.errors import BadRequest
from bodega.model.ids import new_ulid
from bodega.model.limits import check_metadata_key
from bodega.wire import fly
from bodega.wire import worker_calls as wire
from bodega.wire.cluster_info import ClusterInfo
from bodega.wire.http import (
    handle_errors,
    json_response,
    not_found_app_handler,
    query_bool,
    query_int,
    read_model,
)

NONCE = "fly-machine-lease-nonce"
REQUEST_ID = "fly-request-id"
WAIT_SLACK = 5.0  # beyond a /wait's own timeout, for the round trip to the worker

Handler = Callable[[Request, Principal], Awaitable[Response]]


class BrokerApi:
    def __init__(self, *, tokens: Tokens, apps: Apps, machines: Machines, volumes: Volumes,
                 platform: Platform, metrics: BrokerMetrics, name: str, gate: Gate,
                 secrets: AppSecrets | None = None, info: ClusterInfo | None = None) -> None:
        self.tokens = tokens
        self.apps = apps
        self.machines = machines
        self.volumes = volumes
        self.platform = platform
        self.metrics = metrics
        self.name = name
        self.ips = IpAssignments(apps.catalog, apps)
        self.app_delete = AppDelete(apps, machines, volumes, tokens, self.ips)
        self.gate = gate
        self.secrets = secrets
        self.info = info

    def app(self) -> Starlette:
        r = self._route
        m = "/v1/apps/{app}/machines/{id}"
        routes = [
            Route("/v1/health", self.health, methods=["GET"]),
            Route("/openapi.json", self.openapi, methods=["GET"]),
            Route("/v1/openapi.json", self.openapi, methods=["GET"]),
            Route("/docs", self.docs, methods=["GET"]),
            r("/metrics", self.prometheus, "GET", gated=False),
            r("/v1/apps", self.list_apps, "GET"),
            r("/v1/apps", self.create_app, "POST"),
            r("/v1/apps/{app}", self.get_app, "GET"),
            r("/v1/apps/{app}", self.delete_app, "DELETE"),
            r("/v1/apps/{app}/deploy_token", self.deploy_token, "POST"),
            r("/v1/apps/{app}/ip_assignments", self.list_ips, "GET"),
            r("/v1/apps/{app}/ip_assignments", self.assign_ip, "POST"),
            r("/v1/apps/{app}/ip_assignments/{ip}", self.remove_ip, "DELETE"),
            *release_routes(r, self.apps.catalog, self.apps),  # a bodega extension
            *(secret_routes(r, self.secrets) if self.secrets is not None else []),
            *log_routes(r, self.machines),
            r("/v1/orgs/{org_slug}/machines", self.org_machines, "GET"),
            r("/v1/apps/{app}/machines", self.list_machines, "GET"),
            r("/v1/apps/{app}/machines", self.create_machine, "POST"),
            r(m, self.get_machine, "GET"),
            r(m, self.update_machine, "POST"),
            r(m, self.delete_machine, "DELETE"),
            *(r(f"{m}/{action}", self._action(action), "POST")
              for action in ("start", "restart", "cordon", "uncordon")),
            r(f"{m}/stop", self.stop, "POST"),
            r(f"{m}/signal", self.signal, "POST"),
            r(f"{m}/suspend", self.suspend, "POST"),
            r(f"{m}/exec", self.exec, "POST"),
            r(f"{m}/wait", self.wait, "GET"),
            *(r(f"{m}/{part}", self._read(part), "GET")
              for part in ("ps", "events", "versions", "placement", "metadata")),
            r(f"{m}/lease", self.get_lease, "GET"),
            r(f"{m}/lease", self.acquire_lease, "POST"),
            r(f"{m}/lease", self.release_lease, "DELETE"),
            r(f"{m}/metadata", self.replace_metadata, "PUT"),
            r(f"{m}/metadata", self.replace_metadata, "PATCH"),
            r(f"{m}/metadata/{{key}}", self.metadata_key, "GET"),
            r(f"{m}/metadata/{{key}}", self.metadata_key, "POST"),
            r(f"{m}/metadata/{{key}}", self.metadata_key, "DELETE"),
            *volume_routes(r, self.volumes),
            *platform_routes(r, self.platform, self.info),
        ]
        return Starlette(routes=routes, exception_handlers={404: not_found_app_handler,
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

    # -- public -----------------------------------------------------------------------------
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

    # -- apps -------------------------------------------------------------------------------
    def _app_wire(self, name: str) -> dict[str, Any]:
        doc = self.apps.require(name)
        machines = [d for d in self.machines.app_machines(name) if d.get("state") != "destroyed"]
        volumes = [d for d in self.volumes.app_volumes(name) if d.get("state") != "destroyed"]
        status = app_status(self.apps.catalog.rows(RELEASES, app=name), len(machines))
        return self.apps.wire(doc, len(machines), len(volumes), status)

    async def list_apps(self, request: Request, who: Principal) -> Response:
        names = [n for n in self.apps.names(request.query_params.get("org_slug")) if who.can(n)]
        apps = [self._app_wire(n) for n in names]
        return json_response({"total_apps": len(apps), "apps": apps})

    async def create_app(self, request: Request, who: Principal) -> Response:
        who.check_admin("creating apps")
        body = await read_model(request, fly.CreateAppRequest)
        doc = self.apps.create(body.chosen_name(), body.org_slug, body.network)
        return json_response(self.apps.wire(doc, 0, 0, app_status([], 0)), 201)

    async def get_app(self, request: Request, who: Principal) -> Response:
        return json_response(self._app_wire(request.path_params["app"]))

    async def delete_app(self, request: Request, who: Principal) -> Response:
        await self.app_delete.delete(request.path_params["app"])
        return Response(status_code=202)

    async def deploy_token(self, request: Request, who: Principal) -> Response:
        app = request.path_params["app"]
        self.apps.require(app)
        body = await read_model(request, fly.CreateAppDeployTokenRequest, required=False)
        return json_response({"token": self.tokens.create_app_token(app, body.expiry)})

    async def list_ips(self, request: Request, who: Principal) -> Response:
        return json_response({"ips": self.ips.list(request.path_params["app"])})

    async def assign_ip(self, request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.AssignIpRequest)
        return json_response(self.ips.assign(request.path_params["app"], body))

    async def remove_ip(self, request: Request, who: Principal) -> Response:
        self.ips.remove(request.path_params["app"], request.path_params["ip"])
        return Response(status_code=204)

    async def org_machines(self, request: Request, who: Principal) -> Response:
        query = parse_query({k: request.query_params.getlist(k) for k in request.query_params})
        apps = [a for a in self.apps.names(request.path_params["org_slug"]) if who.can(a)]
        return json_response(page([d for a in apps for d in self.machines.app_machines(a)],
                                  query))

    # -- machines -----------------------------------------------------------------------------
    async def list_machines(self, request: Request, who: Principal) -> Response:
        q = request.query_params
        metadata = {k.removeprefix("metadata."): v for k, v in q.items()
                    if k.startswith("metadata.")}
        states = {s.strip() for v in q.getlist("state") for s in v.split(",") if s.strip()}
        regions = {s.strip() for v in q.getlist("region") for s in v.split(",") if s.strip()}
        return json_response(self.machines.list(
            request.path_params["app"], include_deleted=query_bool(request, "include_deleted"),
            regions=regions, states=states, metadata=metadata,
            summary=query_bool(request, "summary")))

    async def create_machine(self, request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.CreateMachineRequest)
        key = request.headers.get("idempotency-key") or request.headers.get(
            "fly-idempotency-key")
        if key is not None and not 1 <= len(key) <= 128:
            raise BadRequest("invalid_argument: Idempotency-Key must be 1-128 characters")
        machine = await self.machines.create(request.path_params["app"], body, key, who.token_id)
        return json_response(machine)

    async def get_machine(self, request: Request, who: Principal) -> Response:
        return json_response(await self.machines.get(request.path_params["app"],
                                                     request.path_params["id"]))

    async def update_machine(self, request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.UpdateMachineRequest)
        return await self._forward(request, "POST", body=wire.UpdateMachineBody(
            config=body.config, current_version=body.current_version,
            skip_launch=body.skip_launch, name=body.name, region=body.region))

    async def delete_machine(self, request: Request, who: Principal) -> Response:
        force = query_bool(request, "force", "kill")
        return await self._forward(request, "DELETE", params={"force": "true"} if force else {})

    def _action(self, action: str) -> Handler:
        async def handle(request: Request, who: Principal) -> Response:
            params = {k: v for k, v in request.query_params.items()
                      if k in ("timeout", "signal", "force_stop")}
            return await self._forward(request, "POST", action, params=params)
        return handle

    def _read(self, part: str) -> Handler:
        async def handle(request: Request, who: Principal) -> Response:
            params = {k: v for k, v in request.query_params.items() if k == "limit"}
            return await self._forward(request, "GET", part, params=params)
        return handle

    async def stop(self, request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.StopRequest, required=False)
        return await self._forward(request, "POST", "stop",
                                   body=wire.StopBody(signal=body.signal, timeout=body.timeout))

    async def signal(self, request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.SignalRequest)
        return await self._forward(request, "POST", "signal",
                                   body=wire.SignalBody(signal=body.signal))

    async def suspend(self, request: Request, who: Principal) -> Response:
        return await self._forward(request, "POST", "suspend")

    async def exec(self, request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.ExecRequest)
        return await self._forward(request, "POST", "exec", body=wire.ExecBody(
            command=body.command, cmd=body.cmd, timeout=body.timeout, stdin=body.stdin,
            container=body.container), timeout=body.timeout + WAIT_SLACK)

    async def wait(self, request: Request, who: Principal) -> Response:
        params: list[tuple[str, str]] = [
            (k, v) for k, v in request.query_params.multi_items()
            if k in ("state", "timeout", "version", "instance_id", "from_event_id")]
        timeout = min(max(query_int(request, "timeout", 60), 1), 60)
        return await self._forward(request, "GET", "wait", params=params,
                                   timeout=timeout + WAIT_SLACK)

    # -- leases and metadata -------------------------------------------------------------------
    async def get_lease(self, request: Request, who: Principal) -> Response:
        return await self._forward(request, "GET", "lease")

    async def acquire_lease(self, request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.CreateLeaseRequest, required=False)
        params = {"ttl": request.query_params["ttl"]} if "ttl" in request.query_params else {}
        return await self._forward(request, "POST", "lease", status=201, params=params,
                                   body=wire.LeaseBody(ttl=body.ttl,
                                                       description=body.description),
                                   owner=who.token_id)

    async def release_lease(self, request: Request, who: Principal) -> Response:
        return await self._forward(request, "DELETE", "lease")

    async def replace_metadata(self, request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.UpdateMetadataRequest)
        await self._forward(request, request.method, "metadata", body=wire.MetadataBody(
            metadata=body.metadata, machine_version=body.machine_version))
        return Response(status_code=204)

    async def metadata_key(self, request: Request, who: Principal) -> Response:
        key = request.path_params["key"]
        try:
            check_metadata_key(key)
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: {exc}") from None
        action = f"metadata/{quote(key, safe='')}"  # one path segment on the worker too
        if request.method == "GET":
            return await self._forward(request, "GET", action)
        value = None
        if request.method == "POST":
            upsert = await read_model(request, fly.UpsertMetadataKeyRequest)
            value = wire.MetadataValueBody(value=upsert.value)
        await self._forward(request, request.method, action, body=value)
        return Response(status_code=204)

    async def _forward(self, request: Request, method: str, action: str = "", *,
                       body: wire.WorkerRequest | None = None, params: Any = None,
                       timeout: float | None = None, status: int = 200,
                       owner: str | None = None) -> Response:
        result = await self.machines.forward(
            request.path_params["app"], request.path_params["id"], method, action, body=body,
            params=params, nonce=request.headers.get(NONCE), timeout=timeout, owner=owner)
        if result is None:
            return Response(status_code=204 if status == 200 else status)
        return json_response(result, status)
