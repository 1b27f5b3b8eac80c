"""The dashboard the broker serves at ``/ui``: its routes, and what they are built from.

``Broker.start`` builds one over its catalog and token store, adds its
routes beside the API's, and has the placer report refusals to it;
``Broker.stop`` closes it first, so open event streams end at once instead
of holding the server's shutdown.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from bodega.broker.auth.tokens import Tokens
from bodega.broker.ui.calls import VisitorClients, own_url
from bodega.broker.ui.core.refusals import RecentRefusals
from bodega.broker.ui.forms import action_routes, login_routes
from bodega.broker.ui.gatekeeper import Gatekeeper
from bodega.broker.ui.pages import page_routes
from bodega.broker.ui.parts import Parts, always_ready
from bodega.broker.ui.render import STATIC
from bodega.broker.ui.sources import ClusterView, no_suspicion
from bodega.broker.ui.stream_routes import stream_routes
from bodega.broker.view.catalog import Catalog

PATH = "/ui/"


class Dashboard:
    def __init__(self, catalog: Catalog, tokens: Tokens, host: str, port: int, *,
                 suspicion_left: Callable[[str], float | None] = no_suspicion,
                 not_ready: Callable[[], str | None] = always_ready) -> None:
        self.refusals = RecentRefusals()
        self.parts = Parts(view=ClusterView(catalog, suspicion_left),
                           api=VisitorClients(own_url(host, port)), gate=Gatekeeper(tokens),
                           refusals=self.refusals, not_ready=not_ready)

    def routes(self) -> list[BaseRoute]:
        return [
            *login_routes(self.parts),
            *page_routes(self.parts),
            *action_routes(self.parts),
            *stream_routes(self.parts),
            Mount("/ui/static", app=StaticFiles(directory=STATIC), name="ui-static"),
        ]

    async def close(self) -> None:
        """End every open stream, and the client the dashboard calls the API with."""
        self.parts.closing.set()
        await self.parts.api.aclose()
