"""An app's releases (a bodega extension): shared rows of the view, like apps and IPs.

``GET /v1/apps/{app}/releases`` lists them newest first, ``POST`` records a new
one (``running``, the next version), ``GET``/``PATCH .../releases/{version}``
reads one or moves its status on (``complete``, ``failed``, ``interrupted``).
The client that deploys writes them; they live in the registry, so they
survive the broker that recorded them and any client reads them back. Two
brokers recording a release of one app in the same instant may both pick the
same next version; the view then keeps one (last writer wins, as for apps). The
bodies and the answer are ``wire/public/releases.py``'s.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import Catalog
from bodega.model.errors import BadRequest, NotFound
from bodega.wire.public.releases import CreateRelease, FinishRelease, Release
from bodega.wire.transport.http import answer_response, read_model

TABLE = "releases"


def key(app: str, version: int) -> str:
    return f"{app}/v{version}"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Releases:
    def __init__(self, catalog: Catalog, apps: Apps) -> None:
        self.catalog = catalog
        self.apps = apps

    def rows(self, app: str) -> list[Release]:
        """The app's releases as the view holds them, in no order."""
        return self.catalog.rows(Release, app=app)

    def list(self, app: str) -> list[Release]:
        self.apps.require(app)
        return [r.public() for r in sorted(self.rows(app), key=lambda r: -r.version)]

    def get(self, app: str, version: str) -> Release:
        self.apps.require(app)
        found = self.catalog.get(Release, key(app, _version(version)))
        if found is None:
            raise NotFound(f"release not found: {app} has no version {version}")
        return found

    def create(self, app: str, body: CreateRelease) -> Release:
        self.apps.require(app)
        version = 1 + max((r.version for r in self.rows(app)), default=0)
        now = _now()
        release = Release(id=key(app, version), app=app, version=version, status="running",
                          **body.model_dump(exclude_none=True), created_at=now,
                          updated_at=now)
        self.catalog.put_shared(TABLE, key(app, version), release.doc())
        return release.public()

    def finish(self, app: str, version: str, body: FinishRelease) -> Release:
        held = self.get(app, version)
        release = held.model_copy(update={
            "status": body.status, "updated_at": _now(),
            **({"failure": body.failure} if body.failure else {})})
        self.catalog.put_shared(TABLE, key(app, held.version), release.doc())
        return release.public()

    def remove_all(self, app: str) -> None:
        for doc in self.catalog.rows(TABLE, app=app):
            self.catalog.delete_shared(TABLE, str(doc["id"]))


def app_status(releases: Sequence[Release], machine_count: int) -> str:
    """An app's status as its releases tell it: ``deployed`` once a release completed;
    ``failed`` when every release that finished failed (or was interrupted); ``pending``
    while none has finished. An app nobody deployed with releases is ``deployed`` if it
    runs machines (created through the Machines API directly), else ``pending``."""
    if not releases:
        return "deployed" if machine_count else "pending"
    statuses = {r.status for r in releases}
    if "complete" in statuses:
        return "deployed"
    if statuses & {"failed", "interrupted"}:
        return "failed"
    return "pending"


def _version(text: str) -> int:
    try:
        value = int(text.removeprefix("v"))
    except ValueError:
        raise BadRequest(f"invalid_argument: release version {text!r} is not a number") from None
    if value < 1:
        raise BadRequest("invalid_argument: release versions start at 1")
    return value


Handler = Callable[[Request, Any], Awaitable[Response]]


def release_routes(route: Callable[[str, Handler, str], Route], catalog: Catalog,
                   apps: Apps) -> list[Route]:
    """The routes, wrapped by the broker's ``route`` (authentication, readiness, metrics)."""
    releases = Releases(catalog, apps)
    path = "/v1/apps/{app}/releases"

    async def list_(request: Request, _who: Any) -> Response:
        return answer_response(releases.list(request.path_params["app"]))

    async def create(request: Request, _who: Any) -> Response:
        body = await read_model(request, CreateRelease)
        return answer_response(releases.create(request.path_params["app"], body), 201)

    async def get(request: Request, _who: Any) -> Response:
        return answer_response(releases.get(request.path_params["app"],
                                            request.path_params["version"]).public())

    async def finish(request: Request, _who: Any) -> Response:
        body = await read_model(request, FinishRelease)
        return answer_response(releases.finish(request.path_params["app"],
                                               request.path_params["version"], body))

    return [route(path, list_, "GET"), route(path, create, "POST"),
            route(path + "/{version}", get, "GET"), route(path + "/{version}", finish, "PATCH")]
