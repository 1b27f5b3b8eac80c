"""The Machines API's ``/v1/apps/{app}/secrets`` routes, plugged into the broker's route table."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.secrets.store import AppSecrets
from bodega.wire.public import fly
from bodega.wire.transport.http import RouteMaker, answer_response, read_model

Handler = Callable[[Request, Principal], Awaitable[Response]]


def secret_routes(r: RouteMaker, secrets: AppSecrets) -> list[Route]:
    async def list_secrets(request: Request, who: Principal) -> Response:
        return answer_response(secrets.list(request.path_params["app"]))

    async def update(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.AppSecretsUpdateRequest)
        return answer_response(secrets.update(request.path_params["app"], body.values))

    async def get(request: Request, who: Principal) -> Response:
        return answer_response(secrets.get(request.path_params["app"],
                                         request.path_params["name"]))

    async def set_one(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.SetAppSecretRequest)
        return answer_response(secrets.set(request.path_params["app"],
                                         request.path_params["name"], body.value), status=201)

    async def delete(request: Request, who: Principal) -> Response:
        return answer_response(secrets.delete(request.path_params["app"],
                                            request.path_params["name"]))

    one = "/v1/apps/{app}/secrets/{name}"
    return [
        r("/v1/apps/{app}/secrets", list_secrets, "GET"),
        r("/v1/apps/{app}/secrets", update, "POST"),
        r(one, get, "GET"), r(one, set_one, "POST"), r(one, delete, "DELETE"),
    ]
