"""HTTP glue every bodega service shares: error shape, JSON bodies, bearer tokens.

Every error leaves as ``{"error": ..., "status": ...}`` with the matching
HTTP status, including bad JSON, validation failures and unexpected
exceptions, so no client ever sees an HTML page or a traceback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.websockets import WebSocket, WebSocketState

from bodega.model.answer import Answer, wire_list
from bodega.model.errors import (
    BadRequest,
    BodegaError,
    PayloadTooLarge,
    validation_message,
)
from bodega.model.forwarding import clip_reason

# The broker's factory of authenticated routes: (path, handler, method, *, gated) -> Route.
RouteMaker = Callable[..., Route]

log = logging.getLogger("bodega.http")

# Every body a client sends is read into memory and parsed at once, so both are bounded:
# a machine config with a big env fits in a few kilobytes, and nests six levels deep.
MAX_BODY = 1 << 20
MAX_DEPTH = 32
M = TypeVar("M", bound=BaseModel)
Handler = Callable[[Request], Awaitable[Response]]


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    return encoded_response(body, status, headers)


def encoded_response(body: bytes, status: int = 200,
                     headers: dict[str, str] | None = None) -> Response:
    """A body already encoded as JSON (an answer model's, or another service's relayed)."""
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def answer_response(answer: Answer | Iterable[Answer], status: int = 200) -> Response:
    """An answer model, or a list of them, as JSON (``Answer.wire``: unset fields left out)."""
    body = answer.wire() if isinstance(answer, Answer) else wire_list(answer)
    return encoded_response(body, status)


def error_response(err: BodegaError) -> Response:
    headers = None
    if err.retry_after is not None:  # whole seconds, never 0: a client told 0 hammers
        headers = {"Retry-After": str(max(1, math.ceil(err.retry_after)))}
    return json_response(err.to_wire(), status=err.http_status, headers=headers)


async def read_body(request: Request) -> bytes:
    """The request body, refused with a 413 as soon as it is known to be over ``MAX_BODY``."""
    too_large = PayloadTooLarge(f"request body over {MAX_BODY} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():  # a chunked body has no length to check up front
        size += len(chunk)
        if size > MAX_BODY:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep ``value`` nests (stops counting past ``limit``); a loop, not recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack and deepest <= limit:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item \
            if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


def parse_json(body: bytes) -> Any:
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except RecursionError:
        data = None
    except (ValueError, UnicodeDecodeError) as exc:  # a JSONDecodeError, or an int too long
        raise BadRequest(f"invalid JSON body: {exc}") from None
    else:
        if json_depth(data) <= MAX_DEPTH:
            return data
    raise BadRequest(f"invalid JSON body: nested more than {MAX_DEPTH} levels deep")


async def read_json(request: Request, *, required: bool = True) -> Any:
    body = await read_body(request)
    if not body.strip():
        if required:
            raise BadRequest("a JSON body is required")
        return {}
    return parse_json(body)


async def read_model(request: Request, model: type[M], *, required: bool = True) -> M:
    return parse_model(await read_json(request, required=required), model)


def parse_model(data: object, model: type[M]) -> M:
    """A JSON body already parsed, as ``model``: a 400 naming what is wrong otherwise."""
    if not isinstance(data, dict):
        raise BadRequest("the JSON body must be an object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(validation_message(exc)) from None


async def read_trusted_model(request: Request, model: type[M]) -> M:
    """A body another bodega service already validated (a broker's create): decoded and
    checked in one pass by pydantic's own JSON parser, with no dict and no depth walk in
    between. Still a 400 in the error shape for anything malformed: the parser bounds
    nesting itself, and the worker's API is reachable by any broker of the cluster."""
    body = await read_body(request)
    if not body.strip():
        raise BadRequest("a JSON body is required")
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise BadRequest(validation_message(exc)) from None


def bearer_token(request: HTTPConnection) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("bearer", "flyv1") and value.strip():
        return value.strip()
    return None


def query_bool(request: Request, *names: str) -> bool:
    for name in names:
        value = request.query_params.get(name)
        if value is not None:
            return value.lower() in ("1", "true", "yes", "on", "")
    return False


def query_int(request: Request, name: str, default: int) -> int:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"invalid_argument: {name} must be an integer") from None


async def handle_errors(request: Request, call: Handler) -> Response:
    """Run ``call`` and turn every failure into the error shape."""
    try:
        return await call(request)
    except BodegaError as err:
        return error_response(err)
    except ValidationError as exc:
        return error_response(BadRequest(validation_message(exc)))
    except HTTPException as exc:
        return json_response({"error": exc.detail, "status": "unknown"}, exc.status_code)
    except Exception:
        log.exception("%s %s failed", request.method, request.url.path)
        return json_response({"error": "internal error; see the server log", "status": "unknown"},
                             500)


async def websocket_only(request: Request) -> Response:
    """The answer of a WebSocket route to a plain request: what it needs, not "no route"."""
    raise BadRequest(f"invalid_argument: {request.url.path} is a WebSocket: ask with the "
                     "headers Connection: Upgrade and Upgrade: websocket")


async def handle_socket_errors(socket: WebSocket,
                               call: Callable[[WebSocket], Awaitable[None]]) -> int:
    """Run a WebSocket route's ``call``; a failure before the upgrade is refused as an HTTP
    answer in the error shape (the ASGI WebSocket denial response), one after it closes the
    socket with 1011 and its message. The status the handshake got (101: accepted)."""
    try:
        await call(socket)
        return 101
    except BodegaError as err:
        return await refuse_socket(socket, err)
    except ValidationError as exc:
        return await refuse_socket(socket, BadRequest(validation_message(exc)))
    except Exception:
        log.exception("WebSocket %s failed", socket.url.path)
        return await refuse_socket(socket, BodegaError("internal error; see the server log"))


async def refuse_socket(socket: WebSocket, err: BodegaError) -> int:
    """Refuse a WebSocket with ``err``: as an HTTP answer in the error shape before its
    upgrade, with a close after it; the status its handshake got."""
    if socket.application_state is WebSocketState.CONNECTING:
        if "websocket.http.response" in socket.scope.get("extensions", {}):
            await socket.send_denial_response(error_response(err))
        else:  # a server without denials: the client sees a bare 403
            await socket.close(1008, clip_reason(err.message))
        return err.http_status
    if socket.application_state is WebSocketState.CONNECTED:
        with contextlib.suppress(Exception):  # the client may be gone already
            await socket.close(1011, clip_reason(err.message))
    return 101


def not_found_app_handler(request: Request, exc: Exception) -> Response:
    """Unknown routes and methods get the error shape too, never an HTML page."""
    status = getattr(exc, "status_code", 404)
    if status == 405:
        return json_response({"error": f"method {request.method} not allowed on "
                                       f"{request.url.path}", "status": "method_not_allowed"}, 405)
    return json_response({"error": f"not found: no route {request.url.path}",
                          "status": "not_found"}, status)
