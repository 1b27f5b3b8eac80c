"""Routes grouped by count of segments answer exactly as the same routes in a plain list."""

from __future__ import annotations

import asyncio

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import Message

from bodega.wire.transport.routing import SegmentGroup, grouped


def named(label: str) -> Route:
    path = label.split(" ", 1)[1]
    method = label.split(" ", 1)[0]

    async def endpoint(request: Request) -> Response:
        return PlainTextResponse(f"{label} {sorted(request.path_params.items())}")

    return Route(path, endpoint, methods=[method], name=label)


async def mounted(request: Request) -> Response:
    return PlainTextResponse(f"mount {request.url.path}")


def routes() -> list[BaseRoute]:
    return [
        named("GET /v1/apps"),
        named("GET /v1/apps/{app}"),
        named("POST /v1/apps/{app}/machines"),
        named("GET /v1/apps/{app}/machines"),
        named("GET /v1/apps/{app}/machines/{id}"),
        named("GET /v1/apps/{app}/machines/wait"),  # after {id}: never reached for "wait"
        named("GET /v1/apps/{app}/files/{rest:path}"),  # any count: closes the groups
        named("GET /v1/apps/{app}/files/index"),  # shadowed by the route above
        Mount("/ui", routes=[Route("/{page}", mounted)]),
        named("GET /ui/{page}"),  # shadowed by the mount
        named("DELETE /v1/apps/{app}"),
        named("GET /v1/{kind}/{id}/x"),
    ]


PATHS = ["/v1/apps", "/v1/apps/", "/v1/apps/web", "/v1/apps/web/machines",
         "/v1/apps/web/machines/", "/v1/apps/web/machines/m1", "/v1/apps/web/machines/wait",
         "/v1/apps/web/files/index", "/v1/apps/web/files/a/b/c", "/ui/home", "/ui/",
         "/v1/volumes/v1/x", "/v1/apps/web/x", "/nothing", "/v1/apps/web/machines/m1/x/y"]


def answer(app: Starlette, method: str, path: str, root: str = "") -> tuple[int, str, str]:
    """The status, body and Location of ``app``'s answer, driven as a server drives it."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": root + path,
             "raw_path": (root + path).encode(), "root_path": root, "query_string": b"",
             "headers": [(b"host", b"bodega")],
             "client": ("127.0.0.1", 1), "server": ("bodega", 80)}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = dict(start["headers"])
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], body.decode(), headers.get(b"location", b"").decode()


def test_a_route_of_any_length_keeps_its_place() -> None:
    out = grouped(routes())
    kinds = [type(route).__name__ for route in out]
    # the groups before the path route, the path route and what follows it, the mount, ...
    assert kinds == ["SegmentGroup", "SegmentGroup", "SegmentGroup", "SegmentGroup", "Route",
                     "SegmentGroup", "Mount", "SegmentGroup", "SegmentGroup", "SegmentGroup"]
    first = out[0]
    assert isinstance(first, SegmentGroup)
    assert [r.name for r in first.routes] == ["GET /v1/apps"]
    assert sum(len(r.routes) if isinstance(r, SegmentGroup) else 1 for r in out) == len(routes())


plain = Starlette(routes=routes())
fast = Starlette(routes=grouped(routes()))


@pytest.mark.parametrize("root", ["", "/api"])
@pytest.mark.parametrize("method", ["GET", "POST", "DELETE", "PUT", "HEAD"])
@pytest.mark.parametrize("path", PATHS)
def test_every_request_is_answered_as_by_the_plain_list(root: str, method: str,
                                                         path: str) -> None:
    assert answer(fast, method, path, root) == answer(plain, method, path, root)


def test_the_answers_tell_the_cases_apart() -> None:
    # The comparison above means something only if the cases differ: a match with its
    # parameters, a 405, a redirect of a trailing slash, a 404, the mount, the path route.
    assert answer(fast, "POST", "/v1/apps/web/machines")[1] == \
        "POST /v1/apps/{app}/machines [('app', 'web')]"
    assert answer(fast, "GET", "/v1/apps/web/machines/wait")[1].startswith(
        "GET /v1/apps/{app}/machines/{id} ")
    assert answer(fast, "PUT", "/v1/apps/web")[0] == 405
    assert answer(fast, "GET", "/v1/apps/")[0] == 307
    assert answer(fast, "GET", "/nothing")[0] == 404
    assert answer(fast, "GET", "/ui/home")[1] == "mount /ui/home"
    assert answer(fast, "GET", "/v1/apps/web/files/index")[1].startswith(
        "GET /v1/apps/{app}/files/{rest:path}")


def test_a_url_is_made_for_a_grouped_route() -> None:
    app = Starlette(routes=grouped(routes()))
    assert app.url_path_for("GET /v1/apps/{app}/machines/{id}", app="web", id="m1") == \
        "/v1/apps/web/machines/m1"
