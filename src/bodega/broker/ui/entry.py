"""How a request enters the dashboard: signed in, allowed, the broker ready; or turned away.

Three kinds of endpoint, each wrapped here:

- a **screen** (a page a browser navigates to): no credentials sends the
  browser to the login form (remembering where it was going), refused ones
  get the login form again with why (and a refused cookie is cleared);
- a **fragment** (what htmx or an event stream asks for): a 401 or 403 with a
  line of HTML, and ``HX-Redirect`` to the login form;
- a **change** (a POST): a fragment that must also pass the CSRF check when
  it came with the cookie.

Errors the API would answer with a code keep that code and say what went
wrong in a page; nothing else escapes as a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from markupsafe import escape
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bodega.broker.ui.core import session
from bodega.broker.ui.gatekeeper import Refused, Visitor
from bodega.broker.ui.parts import Parts
from bodega.broker.ui.render import html
from bodega.model.errors import BodegaError
from bodega.wire.transport.http import read_body

log = logging.getLogger("bodega.broker.ui")

Endpoint = Callable[[Request], Awaitable[Response]]
Handler = Callable[[Request, Visitor], Awaitable[Response]]
FormHandler = Callable[[Request, Visitor, dict[str, str]], Awaitable[Response]]
LOGIN = "/ui/login"


def secure(request: Request) -> bool:
    return request.url.scheme == "https"


def login_page(parts: Parts, request: Request, message: str, status: int,
               clear: bool = False) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    headers = {"set-cookie": session.clear_cookie(secure(request))} if clear else None
    return parts.templates.page("login.html", status, headers, message=message,
                                next=session.safe_next(target), visitor=None,
                                title="Sign in")


def error_page(parts: Parts, visitor: Visitor | None, status: int, title: str,
               message: str, headers: dict[str, str] | None = None) -> Response:
    return parts.templates.page("error.html", status, headers, title=title, message=message,
                                visitor=visitor, status=status)


def screen(parts: Parts, handler: Handler, *, admin: bool = False) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        try:
            visitor = parts.gate.visitor(request)
        except Refused as exc:
            return login_page(parts, request, f"Signed out: {exc.reason}.", 401,
                              clear=exc.by_cookie)
        if visitor is None:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"{LOGIN}?next={quote(session.safe_next(target))}", 303)
        if admin and not visitor.principal.admin:
            return error_page(parts, visitor, 403, "Admin only",
                              f"This screen shows the whole cluster; your token is for "
                              f"{visitor.who} only. Your app is under Apps.")
        why = parts.not_ready()
        if why is not None:
            return error_page(parts, visitor, 503, "Not ready", why, {"retry-after": "1"})
        try:
            return await handler(request, visitor)
        except BodegaError as exc:
            return error_page(parts, visitor, exc.http_status, exc.status.replace("_", " "),
                              exc.message)
        except Exception:
            log.exception("dashboard: %s %s failed", request.method, request.url.path)
            return error_page(parts, visitor, 500, "Internal error",
                              "Something failed while drawing this page; the broker's log "
                              "says what.")
    return endpoint


def _turned_away(status: int, message: str, clear: bool = False,
                 request: Request | None = None) -> Response:
    headers = {"hx-redirect": LOGIN} if status == 401 else {}
    if clear and request is not None:
        headers["set-cookie"] = session.clear_cookie(secure(request))
    return html(f'<p class="flash error">{escape(message)}</p>', status, headers)


def _admit(parts: Parts, request: Request, admin: bool) -> Visitor | Response:
    try:
        visitor = parts.gate.visitor(request)
    except Refused as exc:
        return _turned_away(401, f"Signed out: {exc.reason}.", exc.by_cookie, request)
    if visitor is None:
        return _turned_away(401, "Sign in first.")
    if admin and not visitor.principal.admin:
        return _turned_away(403, "This needs an admin token.")
    return visitor


def fragment(parts: Parts, handler: Handler, *, admin: bool = False) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        admitted = _admit(parts, request, admin)
        if isinstance(admitted, Response):
            return admitted
        return await handler(request, admitted)
    return endpoint


def change(parts: Parts, handler: FormHandler, *, admin: bool = False) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        admitted = _admit(parts, request, admin)
        if isinstance(admitted, Response):
            return admitted
        try:
            form = session.parse_form(await read_body(request))
        except (ValueError, BodegaError) as exc:
            return _turned_away(400, f"Bad form: {exc}")
        if not parts.gate.may_change(request, admitted, form.get(session.CSRF_FIELD)):
            return _turned_away(403, "Refused: the form's CSRF token is missing or wrong "
                                     "(reload the page).")
        return await handler(request, admitted, form)
    return endpoint


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"
