"""The dashboard's screens, each a page rendered whole on the server.

Each page opens one event stream (``streams.py``) that sends the fragments
that changed; the page itself is the same templates rendered once.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from bodega.broker.ui.charts import charts_of
from bodega.broker.ui.entry import screen
from bodega.broker.ui.gatekeeper import Visitor
from bodega.broker.ui.parts import Parts
from bodega.broker.ui.render import html
from bodega.broker.ui.screens import (
    app_screen,
    machine_screen,
    members_screen,
    placements_screen,
    topology_screen,
    worker_screen,
)
from bodega.broker.ui.sources import ClusterView


def page_number(request: Request) -> int:
    text = request.query_params.get("page", "1")
    return int(text) if text.isdigit() and 0 < len(text) < 7 else 1


def page_routes(parts: Parts) -> list[Route]:
    view: ClusterView = parts.view
    t = parts.templates

    async def home(request: Request, visitor: Visitor) -> Response:
        where = "/ui/topology" if visitor.principal.admin else "/ui/apps"
        return RedirectResponse(where, 303)

    async def topology(request: Request, visitor: Visitor) -> Response:
        region = request.query_params.get("region", "")
        page = page_number(request)
        query = urlencode({"region": region, "page": page}) if region else ""
        return t.page("topology.html", visitor=visitor, title="Topology", nav="topology",
                      screen=topology_screen(view, region, page),
                      stream="/ui/streams/topology" + (f"?{query}" if query else ""))

    async def worker(request: Request, visitor: Visitor) -> Response:
        name = request.path_params["name"]
        return t.page("worker.html", visitor=visitor, title=f"Worker {name}", nav="topology",
                      screen=worker_screen(view, name), stream=f"/ui/streams/workers/{quote(name)}")

    async def apps(request: Request, visitor: Visitor) -> Response:
        return t.page("apps.html", visitor=visitor, title="Apps", nav="apps",
                      apps=view.apps(visitor.principal), stream="/ui/streams/apps")

    async def app(request: Request, visitor: Visitor) -> Response:
        name = request.path_params["app"]
        return t.page("app.html", visitor=visitor, title=f"App {name}", nav="apps",
                      screen=app_screen(view, visitor.principal, name),
                      stream=f"/ui/streams/apps/{name}")

    async def machine(request: Request, visitor: Visitor) -> Response:
        app_name, machine_id = request.path_params["app"], request.path_params["machine"]
        visitor.principal.check(app_name)
        shown = await machine_screen(parts, visitor, app_name, machine_id)
        return t.page("machine.html", visitor=visitor, title=f"Machine {machine_id}",
                      nav="apps", screen=shown, flash=None,
                      stream=f"/ui/streams/apps/{app_name}/machines/{machine_id}")

    async def placements(request: Request, visitor: Visitor) -> Response:
        return t.page("placements.html", visitor=visitor, title="Placements",
                      nav="placements", screen=placements_screen(parts), result=None,
                      stream="/ui/streams/placements")

    async def members(request: Request, visitor: Visitor) -> Response:
        return t.page("members.html", visitor=visitor, title="Members", nav="members",
                      screen=members_screen(view), stream="/ui/streams/members")

    async def charts(request: Request, visitor: Visitor) -> Response:
        """The app's (or one machine's) charts, a fragment its page asks for every 15 s."""
        app_name = request.path_params["app"]
        visitor.principal.check(app_name)
        drawn, why = await charts_of(parts, visitor, app_name,
                                     request.path_params.get("machine"))
        return html(t.fragment("_charts.html", charts=drawn, why=why))

    async def bare(request: Request) -> Response:
        return RedirectResponse("/ui/", 308)

    return [
        Route("/ui", bare, methods=["GET"]),
        Route("/ui/", screen(parts, home), methods=["GET"]),
        Route("/ui/topology", screen(parts, topology, admin=True), methods=["GET"]),
        Route("/ui/workers/{name}", screen(parts, worker, admin=True), methods=["GET"]),
        Route("/ui/apps", screen(parts, apps), methods=["GET"]),
        Route("/ui/apps/{app}", screen(parts, app), methods=["GET"]),
        Route("/ui/apps/{app}/machines/{machine}", screen(parts, machine), methods=["GET"]),
        Route("/ui/apps/{app}/charts", screen(parts, charts), methods=["GET"]),
        Route("/ui/apps/{app}/machines/{machine}/charts", screen(parts, charts),
              methods=["GET"]),
        Route("/ui/placements", screen(parts, placements, admin=True), methods=["GET"]),
        Route("/ui/members", screen(parts, members, admin=True), methods=["GET"]),
    ]
