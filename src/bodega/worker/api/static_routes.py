"""``GET /v1/machines/{id}/statics/{path}``: a file of a machine's ``statics``, for the edge.

The proxy asks it for a request under one of the machine's ``url_prefix``es, in
any state of the machine and without starting it (``ops/static_files.py``
finds the file in the image). ``path`` is the request's path, decoded. The
answer is the file with its type (by extension), length, ``Last-Modified`` and
``ETag``; a ``HEAD`` gets the headers only, and a 304 goes to an ``If-None-Match``
naming the ETag or, with none, an ``If-Modified-Since`` not older than the file (as
RFC 9110 orders them; a date that does not parse is ignored). Anything else is a 404 in
the error shape, saying why.
"""

from __future__ import annotations

import mimetypes
from email.utils import parsedate_to_datetime

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
        if not_modified(response.headers.get("etag"), int(found.stat.st_mtime),
                        request.headers.get("if-none-match"),
                        request.headers.get("if-modified-since")):
            return Response(status_code=304, headers={
                k: v for k, v in response.headers.items() if k in KEPT_ON_304})
        return response


def not_modified(etag: str | None, mtime: int, if_none_match: str | None,
                 if_modified_since: str | None) -> bool:
    """Whether the client's copy is current: its ``If-None-Match`` names ``etag`` (or
    ``*``); with no ``If-None-Match``, its ``If-Modified-Since`` is at or after ``mtime``
    (whole seconds, as ``Last-Modified`` says it)."""
    if if_none_match is not None:
        return bool(etag) and (if_none_match.strip() == "*" or etag in [
            t.strip().removeprefix("W/") for t in if_none_match.split(",")])
    if if_modified_since is None:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError):
        return False
    return since.tzinfo is not None and since.timestamp() >= mtime
