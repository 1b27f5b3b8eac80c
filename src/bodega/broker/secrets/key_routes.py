"""The Machines API's ``/v1/apps/{app}/secretkeys`` routes: keys set, generated and used here.

Encrypt, decrypt, sign and verify open the key in the broker and answer with the
result only; a use the key's type does not have (an HMAC key asked to encrypt), a
ciphertext that does not open or a signature that does not verify is a 400.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.secrets.keys import AppSecretKeys
from bodega.model.errors import BadRequest
from bodega.runtime import key_types
from bodega.runtime.key_types import KeyRefused
from bodega.wire.public import secret_keys as wire
from bodega.wire.transport.http import RouteMaker, answer_response, read_model

T = TypeVar("T")


def secret_key_routes(r: RouteMaker, keys: AppSecretKeys) -> list[Route]:
    def where(request: Request) -> tuple[str, str, str | None]:
        params = request.path_params
        return params["app"], params["name"], request.query_params.get("min_version")

    async def list_keys(request: Request, who: Principal) -> Response:
        q = request.query_params
        return answer_response(keys.list(request.path_params["app"], q.get("types"),
                                         q.get("min_version")))

    async def get(request: Request, who: Principal) -> Response:
        return answer_response(keys.get(*where(request)))

    async def set_key(request: Request, who: Principal) -> Response:
        body = await read_model(request, wire.SetSecretkeyRequest)
        if body.value is None:
            raise BadRequest("invalid_argument: value is required (or POST .../generate)")
        app, name, _ = where(request)
        return answer_response(keys.set(app, name, body.type, bytes(body.value)), status=201)

    async def generate(request: Request, who: Principal) -> Response:
        body = await read_model(request, wire.SetSecretkeyRequest)
        if body.value:
            raise BadRequest("invalid_argument: generate draws the key itself; send no value")
        app, name, _ = where(request)
        return answer_response(keys.set(app, name, body.type, None), status=201)

    async def delete(request: Request, who: Principal) -> Response:
        app, name, _ = where(request)
        return answer_response(keys.delete(app, name))

    async def encrypt(request: Request, who: Principal) -> Response:
        body = await read_model(request, wire.EncryptSecretkeyRequest)
        key = keys.material(*where(request))
        sealed = _use(lambda: key_types.encrypt(key, bytes(body.plaintext),
                                                bytes(body.associated_data or [])))
        return answer_response(wire.Ciphertext(ciphertext=list(sealed)))

    async def decrypt(request: Request, who: Principal) -> Response:
        body = await read_model(request, wire.DecryptSecretkeyRequest)
        key = keys.material(*where(request))
        plain = _use(lambda: key_types.decrypt(key, bytes(body.ciphertext),
                                               bytes(body.associated_data or [])))
        return answer_response(wire.Plaintext(plaintext=list(plain)))

    async def sign(request: Request, who: Principal) -> Response:
        body = await read_model(request, wire.SignSecretkeyRequest)
        key = keys.material(*where(request))
        signature = _use(lambda: key_types.sign(key, bytes(body.plaintext)))
        return answer_response(wire.Signature(signature=list(signature)))

    async def verify(request: Request, who: Principal) -> Response:
        body = await read_model(request, wire.VerifySecretkeyRequest)
        key = keys.material(*where(request))
        if not _use(lambda: key_types.verify(key, bytes(body.plaintext),
                                             bytes(body.signature))):
            raise BadRequest("invalid_argument: the signature does not verify with this key")
        return Response(status_code=204)

    one = "/v1/apps/{app}/secretkeys/{name}"
    return [
        r("/v1/apps/{app}/secretkeys", list_keys, "GET"),
        r(one, get, "GET"), r(one, set_key, "POST"), r(one, delete, "DELETE"),
        r(f"{one}/generate", generate, "POST"), r(f"{one}/encrypt", encrypt, "POST"),
        r(f"{one}/decrypt", decrypt, "POST"), r(f"{one}/sign", sign, "POST"),
        r(f"{one}/verify", verify, "POST"),
    ]


def _use(call: Callable[[], T]) -> T:
    try:
        return call()
    except KeyRefused as exc:
        raise BadRequest(f"invalid_argument: {exc}") from None
