"""``/prometheus/<org>/api/v1/...`` on the public API, and the store's targets on the
internal listener.

The public routes (Fly's shape: ``query``, ``query_range``, ``series``, ``labels``,
``label/<name>/values``, by GET or POST) take the API token: an admin token any org,
an app token its app's org only (``core/scope.py``); the query goes to the host's
store (``store.py``) with the org's filter added. ``GET /v1/metrics/targets?kind=``
(mutual TLS, the metrics store's role) lists what the store scrapes
(``core/targets.py``); ``POST /v1/metrics/query`` (brokers only) takes a query
another broker hands this one for its host's store (``store.py``).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.prometheus.core.scope import (
    LABEL_VALUES,
    STORE_PATHS,
    Caller,
    forwarded,
    store_path,
)
from bodega.broker.prometheus.core.targets import app_targets, cluster_targets, daemons
from bodega.broker.prometheus.store import PEER_QUERY_PATH, MetricsStore, PeerQuery
from bodega.broker.view.catalog import Catalog
from bodega.model.errors import BadRequest
from bodega.model.machine import Machine
from bodega.model.rows.apps import AppRow
from bodega.model.rows.workers import WorkerRow
from bodega.wire.internal.metrics_store import TARGET_KINDS, TARGETS_PATH, TargetGroup
from bodega.wire.transport.http import (
    RouteMaker,
    encoded_response,
    json_response,
    read_model,
)
from bodega.wire.transport.peer_access import PeerAccess

PREFIX = "/prometheus/{org}/api/v1"


def caller_of(who: Principal, catalog: Catalog) -> Caller:
    if who.admin:
        return Caller(admin=True)
    row = catalog.get(AppRow, who.app) if who.app else None
    return Caller(admin=False, app=who.app, app_org=row.org_slug if row is not None else None)


MAX_FORM = 1 << 20  # bytes of a POSTed query's form


def form_fields(content_type: str, body: bytes) -> list[tuple[str, str]]:
    """A POST's fields: Prometheus' API takes them URL-encoded, as a query string is."""
    if not body:
        return []
    if content_type.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise BadRequest("invalid_argument: a POSTed query is a form "
                         "(application/x-www-form-urlencoded)")
    if len(body) > MAX_FORM:
        raise BadRequest(f"invalid_argument: a query's form is at most {MAX_FORM} bytes")
    try:
        return parse_qsl(body.decode(), keep_blank_values=True, strict_parsing=True)
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("invalid_argument: the form does not parse") from None


def prometheus_routes(r: RouteMaker, catalog: Catalog, store: MetricsStore) -> list[Route]:
    async def ask(request: Request, who: Principal) -> Response:
        org = request.path_params["org"]
        path = store_path(request.path_params.get("endpoint", ""),
                          request.path_params.get("label"))
        params = list(request.query_params.multi_items())
        if request.method == "POST":
            params += form_fields(request.headers.get("content-type", ""),
                                  await request.body())
        answer = await store.ask(path, forwarded(params, caller_of(who, catalog), org))
        return encoded_response(answer.body, answer.status,
                                {"Content-Type": answer.content_type})

    routes = []
    for method in ("GET", "POST"):
        routes += [r(f"{PREFIX}/{{endpoint}}", ask, method),
                   r(f"{PREFIX}/label/{{label}}/values", ask, method)]
    return routes


def targets(catalog: Catalog, kind: str) -> list[TargetGroup]:
    if kind == "cluster":
        members = catalog.members()
        status = {m.name: m.status for m in members}
        return cluster_targets(daemons(catalog.rows(WorkerRow), members, status))
    orgs = {row.name: row.org_slug for row in catalog.rows(AppRow)}
    return app_targets(catalog.rows(Machine, state="started"), orgs)


def internal_routes(access: PeerAccess, catalog: Catalog, store: MetricsStore
                    ) -> list[BaseRoute]:
    """The store's targets (for the metrics store), and a query another broker hands this
    one for its host's store (the filter added by that broker, which the access table
    lets alone call it)."""
    async def listed(request: Request) -> Response:
        kind = request.query_params.get("kind", "cluster")
        if kind not in TARGET_KINDS:
            raise BadRequest(f"invalid_argument: kind is one of {', '.join(TARGET_KINDS)}")
        return json_response([g.model_dump() for g in targets(catalog, kind)])

    async def query(request: Request) -> Response:
        asked = await read_model(request, PeerQuery)
        if asked.path not in STORE_PATHS and not LABEL_VALUES.match(asked.path):
            raise BadRequest(f"invalid_argument: no store path {asked.path[:64]!r}")
        answer = await store.ask_here(asked.path, asked.params)
        return encoded_response(answer.body, answer.status,
                                {"Content-Type": answer.content_type})

    return [access.route(TARGETS_PATH, listed, "GET"),
            access.route(PEER_QUERY_PATH, query, "POST")]
