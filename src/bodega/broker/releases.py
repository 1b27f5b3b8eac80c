"""An app's releases (a bodega extension): shared rows of the view, like apps and IPs.

``GET /v1/apps/{app}/releases`` lists them newest first, ``POST`` records a new
one (``running``, the next version), ``GET``/``PATCH .../releases/{version}``
reads one or moves its status on (``complete``, ``failed``, ``interrupted``).
The client that deploys writes them; they live in the registry, so they
survive the broker that recorded them and any client reads them back. Two
brokers recording a release of one app in the same instant may both pick the
same next version; the view then keeps one (last writer wins, as for apps).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.apps import Apps
from bodega.broker.catalog import Catalog
from bodega.model.errors import BadRequest, NotFound
from bodega.wire.http import json_response, read_model

TABLE = "releases"
Status = Literal["running", "complete", "failed", "interrupted"]
MAX_CONFIG_KEYS = 64


class CreateRelease(BaseModel):
    model_config = ConfigDict(extra="forbid")

    strategy: str = Field(min_length=1, max_length=32)
    image: str = Field(min_length=1, max_length=512)
    config: dict[str, Any] = Field(max_length=MAX_CONFIG_KEYS)
    user: str = Field(default="unknown", max_length=128)
    description: str | None = Field(default=None, max_length=512)
    base_dir: str | None = Field(default=None, max_length=4096)


class FinishRelease(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Status
    failure: str | None = Field(default=None, max_length=4096)


def key(app: str, version: int) -> str:
    return f"{app}/v{version}"


def public(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "id"}


class Releases:
    def __init__(self, catalog: Catalog, apps: Apps) -> None:
        self.catalog = catalog
        self.apps = apps

    def list(self, app: str) -> list[dict[str, Any]]:
        self.apps.require(app)
        docs = self.catalog.rows(TABLE, app=app)
        return [public(d) for d in sorted(docs, key=lambda d: -int(d["version"]))]

    def get(self, app: str, version: str) -> dict[str, Any]:
        self.apps.require(app)
        doc = self.catalog.get(TABLE, key(app, _version(version)))
        if doc is None:
            raise NotFound(f"release not found: {app} has no version {version}")
        return doc

    def create(self, app: str, body: CreateRelease) -> dict[str, Any]:
        self.apps.require(app)
        version = 1 + max((int(d["version"]) for d in self.catalog.rows(TABLE, app=app)),
                          default=0)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        doc = {"id": key(app, version), "app": app, "version": version, "status": "running",
               **body.model_dump(exclude_none=True), "created_at": now, "updated_at": now}
        self.catalog.put_shared(TABLE, doc["id"], doc)
        return public(doc)

    def finish(self, app: str, version: str, body: FinishRelease) -> dict[str, Any]:
        doc = {**self.get(app, version), "status": body.status,
               "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if body.failure:
            doc["failure"] = body.failure
        self.catalog.put_shared(TABLE, doc["id"], doc)
        return public(doc)

    def remove_all(self, app: str) -> None:
        for doc in self.catalog.rows(TABLE, app=app):
            self.catalog.delete_shared(TABLE, str(doc["id"]))


def app_status(releases: list[dict[str, Any]], machine_count: int) -> str:
    """An app's status as its releases tell it: ``deployed`` once a release completed;
    ``failed`` when every release that finished failed (or was interrupted); ``pending``
    while none has finished. An app nobody deployed with releases is ``deployed`` if it
    runs machines (created through the Machines API directly), else ``pending``."""
    if not releases:
        return "deployed" if machine_count else "pending"
    statuses = {str(r.get("status")) for r in releases}
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
        return json_response(releases.list(request.path_params["app"]))

    async def create(request: Request, _who: Any) -> Response:
        body = await read_model(request, CreateRelease)
        return json_response(releases.create(request.path_params["app"], body), 201)

    async def get(request: Request, _who: Any) -> Response:
        return json_response(public(releases.get(request.path_params["app"],
                                                 request.path_params["version"])))

    async def finish(request: Request, _who: Any) -> Response:
        body = await read_model(request, FinishRelease)
        return json_response(releases.finish(request.path_params["app"],
                                             request.path_params["version"], body))

    return [route(path, list_, "GET"), route(path, create, "POST"),
            route(path + "/{version}", get, "GET"), route(path + "/{version}", finish, "PATCH")]
