"""``/v1/apps/{app}/certificates``: the edge's certificates (a bodega extension, as flyctl's
``fly certs``), plugged into the broker's route table."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth import Principal
from bodega.broker.certificates import AppCertificates
from bodega.wire.certificates import CertificateRequest
from bodega.wire.http import RouteMaker, json_response, read_model


def certificate_routes(r: RouteMaker, certs: AppCertificates) -> list[Route]:
    async def list_certs(request: Request, who: Principal) -> Response:
        return json_response(certs.list(request.path_params["app"]).model_dump(mode="json"))

    async def add(request: Request, who: Principal) -> Response:
        body = await read_model(request, CertificateRequest)
        view = certs.add(request.path_params["app"], body)
        return json_response(view.model_dump(mode="json"), status=201)

    async def show(request: Request, who: Principal) -> Response:
        view = certs.get(request.path_params["app"], request.path_params["hostname"])
        return json_response(view.model_dump(mode="json"))

    async def remove(request: Request, who: Principal) -> Response:
        view = certs.remove(request.path_params["app"], request.path_params["hostname"])
        return json_response(view.model_dump(mode="json"))

    one = "/v1/apps/{app}/certificates/{hostname}"
    return [
        r("/v1/apps/{app}/certificates", list_certs, "GET"),
        r("/v1/apps/{app}/certificates", add, "POST"),
        r(one, show, "GET"), r(one, remove, "DELETE"),
    ]
