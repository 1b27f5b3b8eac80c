"""``/v1/apps/{app}/certificates``: the Machines API's certificate operations on the edge's
certificates (the ones ``bodega certs`` manages), plugged into the broker's route table.

The document's eight: list (``filter``, ``cursor``, ``limit``), show, delete (204),
``custom`` (import a PEM chain and key), ``acme`` (refused: no ACME client here),
``check``, and the ``acme``/``custom`` deletes. bodega adds one: ``POST
.../certificates`` with a hostname has the cluster CA issue a certificate
(``bodega certs add``). A broker without a certificates key answers every one
with a 409 naming the key it lacks, never "no route".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.certificates.core.answers import parse_limit, removed
from bodega.broker.certificates.store import AppCertificates
from bodega.model.errors import BadRequest, Conflict
from bodega.wire.public.fly_certificates import (
    AcmeCertificateRequest,
    CustomCertificateRequest,
    IssueCertificateRequest,
)
from bodega.wire.transport.http import RouteMaker, json_response, read_model

Handler = Callable[[Request, AppCertificates], Awaitable[Response]]
NO_KEY = ("this broker keeps no certificates: it runs without the cluster's certificates "
          "key (--certs-key or BODEGA_CERTS_KEY; bodega up gives its brokers one)")
GONE_WARNING = ("the proxies no longer serve a certificate for {host}: TLS clients naming it "
                "get the default certificate")


def _answer(model: BaseModel, status: int = 200) -> Response:
    return json_response(model.model_dump(mode="json", exclude_none=True), status=status)


def certificate_routes(r: RouteMaker, certs: AppCertificates | None) -> list[Route]:
    def with_certs(handler: Handler) -> Callable[[Request, Principal], Awaitable[Response]]:
        async def routed(request: Request, who: Principal) -> Response:
            if certs is None:
                raise Conflict(NO_KEY)
            return await handler(request, certs)
        return routed

    async def list_certs(request: Request, certs: AppCertificates) -> Response:
        q = request.query_params
        try:
            limit = parse_limit(q.get("limit"))
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        return _answer(certs.list(request.path_params["app"], filter=q.get("filter", ""),
                                  cursor=q.get("cursor", ""), limit=limit))

    async def issue(request: Request, certs: AppCertificates) -> Response:
        body = await read_model(request, IssueCertificateRequest)
        return _answer(certs.issue(request.path_params["app"], body.hostname), 201)

    async def custom(request: Request, certs: AppCertificates) -> Response:
        body = await read_model(request, CustomCertificateRequest)
        return _answer(certs.custom(request.path_params["app"], body), 201)

    async def acme(request: Request, certs: AppCertificates) -> Response:
        body = await read_model(request, AcmeCertificateRequest)
        return _answer(certs.acme(request.path_params["app"], body), 201)

    async def show(request: Request, certs: AppCertificates) -> Response:
        return _answer(certs.get(request.path_params["app"], request.path_params["hostname"]))

    async def check(request: Request, certs: AppCertificates) -> Response:
        return _answer(certs.check(request.path_params["app"],
                                   request.path_params["hostname"]))

    async def remove(request: Request, certs: AppCertificates) -> Response:
        certs.remove(request.path_params["app"], request.path_params["hostname"])
        return Response(status_code=204)

    async def remove_acme(request: Request, certs: AppCertificates) -> Response:
        row = certs.remove(request.path_params["app"], request.path_params["hostname"], "fly")
        return _answer(removed(row.hostname))

    async def remove_custom(request: Request, certs: AppCertificates) -> Response:
        row = certs.remove(request.path_params["app"], request.path_params["hostname"],
                           "custom")
        return _answer(removed(row.hostname, GONE_WARNING.format(host=row.hostname)))

    base = "/v1/apps/{app}/certificates"
    one = base + "/{hostname}"
    return [r(path, with_certs(handler), method) for path, handler, method in (
        (base, list_certs, "GET"), (base, issue, "POST"),
        (f"{base}/custom", custom, "POST"), (f"{base}/acme", acme, "POST"),
        (one, show, "GET"), (one, remove, "DELETE"), (f"{one}/check", check, "POST"),
        (f"{one}/acme", remove_acme, "DELETE"), (f"{one}/custom", remove_custom, "DELETE"))]
