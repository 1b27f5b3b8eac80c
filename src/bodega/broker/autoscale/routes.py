"""An app's autoscale setting (a bodega extension): ``PUT/GET/DELETE /v1/apps/{app}/autoscale``.

Any broker writes the setting, a shared row of the view (last writer wins, the whole
setting at once); ``GET`` adds what the app's evaluator last decided and why, from its
run row. ``DELETE`` drops both: no broker evaluates the app any more, and its machines
stay as they are. An app token may set its own app's.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import Catalog
from bodega.model.errors import NotFound
from bodega.model.rows import AutoscaleRow, AutoscaleRunRow
from bodega.wire.public.autoscale import Autoscale, AutoscaleSetting, SetAutoscale
from bodega.wire.transport.http import RouteMaker, answer_response, read_model


class AutoscaleSettings:
    def __init__(self, catalog: Catalog, apps: Apps) -> None:
        self.catalog = catalog
        self.apps = apps

    def put(self, app: str, body: SetAutoscale) -> Autoscale:
        self.apps.require(app)
        row = AutoscaleRow(app=app, **body.model_dump(),
                           updated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.catalog.put_shared(AutoscaleRow.TABLE, app, row.doc())
        return self._answer(row, self.catalog.get(AutoscaleRunRow, app))

    def get(self, app: str) -> Autoscale:
        self.apps.require(app)
        row = self.catalog.get(AutoscaleRow, app)
        if row is None:
            raise NotFound(f"autoscale not set: app {app} has no autoscale setting "
                           f"(bodega autoscale set -a {app} ...)")
        return self._answer(row, self.catalog.get(AutoscaleRunRow, app))

    def delete(self, app: str) -> None:
        self.get(app)
        self.remove_all(app)

    def remove_all(self, app: str) -> None:
        for table in (AutoscaleRow.TABLE, AutoscaleRunRow.TABLE):
            if self.catalog.get(table, app) is not None:
                self.catalog.delete_shared(table, app)

    @staticmethod
    def _answer(row: AutoscaleRow, run: AutoscaleRunRow | None) -> Autoscale:
        setting = AutoscaleSetting.model_validate(row.model_dump(exclude={"app"}))
        if run is None:
            return Autoscale(app=row.app, setting=setting)
        return Autoscale(app=row.app, setting=setting, evaluator=run.holder,
                         decision=run.decision, draining=sorted(run.memory.draining),
                         error=run.error)


def autoscale_routes(r: RouteMaker, settings: AutoscaleSettings) -> list[Route]:
    path = "/v1/apps/{app}/autoscale"

    async def put(request: Request, who: Principal) -> Response:
        body = await read_model(request, SetAutoscale)
        return answer_response(settings.put(request.path_params["app"], body))

    async def get(request: Request, who: Principal) -> Response:
        return answer_response(settings.get(request.path_params["app"]))

    async def delete(request: Request, who: Principal) -> Response:
        settings.delete(request.path_params["app"])
        return Response(status_code=204)

    return [r(path, put, "PUT"), r(path, get, "GET"), r(path, delete, "DELETE")]
