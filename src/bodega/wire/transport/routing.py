"""Routes matched by their number of path segments first.

Starlette's router tries every route in order until one matches; the broker
has over a hundred, so a create tried some fifty regular expressions before
its own. A ``Route``'s parameters never match a ``/``, so a route can only
match a path with as many segments as its own: ``grouped`` puts each run of
such routes into one ``SegmentGroup`` per count of segments, which looks at a
request only when the counts agree and then tries its routes in their order.

Which route answers is unchanged: routes of different counts never match the
same path, and a route that can match any count (a ``Mount``, a ``{x:path}``
parameter) keeps its place and closes the groups before it, so no route after
it is tried ahead of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette._utils import get_route_path  # what Route.matches matches against
from starlette.datastructures import URLPath
from starlette.routing import BaseRoute, Match, NoMatchFound, Route
from starlette.types import Receive, Scope, Send


def _slashes(route: BaseRoute) -> int | None:
    """The number of ``/`` in every path the route matches, or None if it varies."""
    if type(route) is not Route or ":path}" in route.path:
        return None
    return route.path.count("/")


class SegmentGroup(BaseRoute):
    """Routes whose paths have ``slashes`` slashes, tried in order."""

    def __init__(self, slashes: int, routes: list[Route]) -> None:
        self.slashes = slashes
        self.routes = routes

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or get_route_path(scope).count("/") != self.slashes:
            return Match.NONE, {}
        partial: Scope | None = None
        for route in self.routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                return match, {**child, "route": route}  # the router hands the request on
            if match is Match.PARTIAL and partial is None:
                partial = {**child, "route": route}  # the method differs: a 405, unless...
        return (Match.PARTIAL, partial) if partial is not None else (Match.NONE, {})

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        route: BaseRoute = scope["route"]  # the member that matched, put there by matches
        await route.handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        for route in self.routes:
            try:
                return route.url_path_for(name, **path_params)
            except NoMatchFound:
                continue
        raise NoMatchFound(name, path_params)


def grouped(routes: Sequence[BaseRoute]) -> list[BaseRoute]:
    """``routes``, each run between routes of any length grouped by count of segments."""
    out: list[BaseRoute] = []
    groups: dict[int, SegmentGroup] = {}
    for route in routes:
        slashes = _slashes(route)
        if slashes is None:
            out.append(route)
            groups = {}  # a route after this one must not be tried before it
            continue
        group = groups.get(slashes)
        if group is None:
            group = groups[slashes] = SegmentGroup(slashes, [])
            out.append(group)
        assert isinstance(route, Route)
        group.routes.append(route)
    return out

