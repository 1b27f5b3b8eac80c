"""What the dashboard's forms do: sign in and out, act on a machine, ask where a machine
would go. Every change goes through the public API with the visitor's token (``calls.py``).

With scripts, htmx posts a form and swaps in the answer (a line saying what
happened, and the machine's new state); without them the form posts as any
HTML form does and the answer is the page again.
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from bodega.broker.ui.core import session
from bodega.broker.ui.core.machine_view import ACTION_NAMES, machine_detail, where_it_goes
from bodega.broker.ui.entry import change, error_page, is_htmx, secure
from bodega.broker.ui.gatekeeper import Refused, Visitor
from bodega.broker.ui.parts import Parts
from bodega.broker.ui.render import html
from bodega.model.errors import BodegaError, validation_message
from bodega.model.machine_config import Guest
from bodega.wire.public.fly import PlacementsRequest
from bodega.wire.transport.http import read_body

MOST_CPUS = 64
MOST_COUNT = 1000


def login_routes(parts: Parts) -> list[Route]:
    t = parts.templates

    async def show(request: Request) -> Response:
        target = session.safe_next(request.query_params.get("next"))
        return t.page("login.html", message="", next=target, visitor=None, title="Sign in")

    async def sign_in(request: Request) -> Response:
        try:
            form = session.parse_form(await read_body(request))
        except (ValueError, BodegaError) as exc:
            return t.page("login.html", 400, message=f"Bad form: {exc}", next=session.HOME,
                          visitor=None, title="Sign in")
        target = session.safe_next(form.get("next"))
        if not session.same_origin(request.headers.get("origin"), request.headers.get("host")):
            return t.page("login.html", 403, message="Refused: the form came from another site.",
                          next=target, visitor=None, title="Sign in")
        token = form.get("token", "").strip()
        if not token:
            return t.page("login.html", 400, message="Paste a token first.", next=target,
                          visitor=None, title="Sign in")
        try:
            parts.gate.check_token(token)
        except Refused as exc:
            return t.page("login.html", 401, message=f"Refused: {exc.reason}.", next=target,
                          visitor=None, title="Sign in")
        response = RedirectResponse(target, 303)
        response.headers["set-cookie"] = session.set_cookie(token, secure(request))
        return response

    async def sign_out(request: Request, visitor: Visitor, form: dict[str, str]) -> Response:
        if is_htmx(request):
            return html("", 200, {"hx-redirect": "/ui/login",
                                  "set-cookie": session.clear_cookie(secure(request))})
        response = RedirectResponse("/ui/login", 303)
        response.headers["set-cookie"] = session.clear_cookie(secure(request))
        return response

    return [
        Route("/ui/login", show, methods=["GET"]),
        Route("/ui/login", sign_in, methods=["POST"]),
        Route("/ui/logout", change(parts, sign_out), methods=["POST"]),
    ]


def action_routes(parts: Parts) -> list[Route]:
    t = parts.templates

    async def act(request: Request, visitor: Visitor, form: dict[str, str]) -> Response:
        app, machine_id = request.path_params["app"], request.path_params["machine"]
        action = request.path_params["action"]
        page = f"/ui/apps/{app}/machines/{machine_id}"
        if action not in ACTION_NAMES:
            return t.page("_flash.html", 404, ok=False, text=f"No action {action!r}.")
        try:
            api = parts.api.of(visitor.token)
            await api.action(app, machine_id, action)
            machine = await api.machine(app, machine_id)
        except BodegaError as exc:
            if not is_htmx(request):
                return error_page(parts, visitor, exc.http_status, f"{action} refused",
                                  exc.message)
            return t.page("_flash.html", ok=False, text=f"{action} refused: {exc.message}")
        if not is_htmx(request):
            return RedirectResponse(page, 303)
        known = parts.view.machine(machine_id)
        detail = machine_detail(app, machine, known.worker if known else "")
        return t.page("_action_done.html", action=action, detail=detail, visitor=visitor)

    async def where(request: Request, visitor: Visitor, form: dict[str, str]) -> Response:
        try:
            body = placement_body(form)
            answer = where_it_goes(await parts.api.of(visitor.token).placements(body))
        except ValueError as exc:
            return t.page("_flash.html", ok=False, text=f"Bad form: {exc}")
        except BodegaError as exc:
            return t.page("_flash.html", ok=False, text=exc.message)
        return t.page("_where.html", result=answer, asked=body)

    return [
        Route("/ui/apps/{app}/machines/{machine}/{action}", change(parts, act),
              methods=["POST"]),
        Route("/ui/placements/where", change(parts, where, admin=True), methods=["POST"]),
    ]


def placement_body(form: dict[str, str]) -> PlacementsRequest:
    """The ``POST /v1/platform/placements`` body the form asks for (ValueError if it is not
    one); the API itself checks the rest, as it would for any client."""
    def number(name: str, default: int, most: int) -> int:
        text = form.get(name, "").strip() or str(default)
        if not text.isdigit() or not 0 <= int(text) <= most:
            raise ValueError(f"{name} must be a whole number from 0 to {most}")
        return int(text)

    try:
        return PlacementsRequest(
            compute=Guest(cpu_kind=form.get("cpu_kind") or "shared",
                          cpus=number("cpus", 1, MOST_CPUS),
                          memory_mb=number("memory_mb", 256, 1024 * 256)),
            count=number("count", 1, MOST_COUNT), explain=True,
            region=form.get("region", "").strip() or None,
            app=form.get("app", "").strip() or None, image=form.get("image", "").strip() or None)
    except ValidationError as exc:
        raise ValueError(validation_message(exc).removeprefix("invalid_argument: ")) from None
