"""``GET /v1/machines/{id}/statics/{path}``: a file of a machine's ``statics``, for the edge.

The proxy asks it for a request under one of the machine's ``url_prefix``es, in
any state of the machine and without starting it (``ops/static_files.py``
finds the file in the image). ``path`` is the request's path, decoded. The
answer is the file with its type (by extension), length, ``Last-Modified`` and
``ETag``; a ``HEAD`` gets the headers only, an ``If-None-Match`` naming the
ETag a 304. Anything else is a 404 in the error shape, saying why.
"""

from __future__ import annotations

import mimetypes

from starlette.requests import Request
from starlette.responses import FileResponse, Response

from bodega.worker.api.machine_routes import RouteSpec, find_machine
from bodega.worker.ops.static_files import StaticFiles

STATICS = "/v1/machines/{id}/statics/{path:path}"
KEPT_ON_304 = ("etag", "last-modified")


class StaticRoutes:
    def __init__(self, files: StaticFiles) -> None:
        self.files = files

    def routes(self) -> list[RouteSpec]:
        return [(STATICS, "GET", self.static)]  # HEAD too: starlette answers it from GET

    async def static(self, request: Request) -> Response:
        row = find_machine(self.files.machines, request)
        found = self.files.file(row, "/" + request.path_params["path"])
        kind, _ = mimetypes.guess_type(found.path.name)
        response = FileResponse(found.path, stat_result=found.stat,
                                media_type=kind or "application/octet-stream")
        etag = response.headers.get("etag")
        asked = request.headers.get("if-none-match")
        if etag and asked and (asked.strip() == "*" or etag in
                               [t.strip().removeprefix("W/") for t in asked.split(",")]):
            return Response(status_code=304, headers={
                k: v for k, v in response.headers.items() if k in KEPT_ON_304})
        return response
