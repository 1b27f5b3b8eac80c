"""Who is looking at the dashboard: the session cookie or a bearer token, checked as the API
checks tokens.

A request carries its token in ``Authorization: Bearer`` (as the API takes
it) or in the session cookie a login set; either is checked by the broker's
own ``Tokens``, so a token the API refuses (unknown, expired, revoked) is
refused here too, at every request, and an app token sees what the API lets
it see. A request that changes something and came with the cookie must carry
the session's CSRF token, and, when the browser says where it came from, come
from this host.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from bodega.broker.auth.tokens import Principal, Tokens
from bodega.broker.ui.core import session
from bodega.model.errors import Unauthorized
from bodega.wire.transport.http import bearer_token


@dataclass(frozen=True)
class Visitor:
    principal: Principal
    token: str  # kept to call the API on the visitor's behalf; never rendered
    by_cookie: bool

    @property
    def csrf(self) -> str:
        return session.csrf_token(self.token)

    @property
    def who(self) -> str:
        return "admin" if self.principal.admin else f"app {self.principal.app}"


class Refused(Exception):
    """Credentials came and were refused."""

    def __init__(self, reason: str, by_cookie: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.by_cookie = by_cookie


class Gatekeeper:
    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens

    def visitor(self, request: Request) -> Visitor | None:
        """The visitor, None when no credentials came; raises ``Refused`` for bad ones."""
        header = request.headers.get("authorization")
        if header is not None:
            raw = bearer_token(request)
            if raw is None:
                raise Refused("send Authorization: Bearer <token>", by_cookie=False)
            return self._check(raw, by_cookie=False)
        cookie = request.cookies.get(session.COOKIE)
        if cookie is None:
            return None
        raw = session.cookie_token(cookie)
        if raw is None:
            raise Refused("the session cookie is not one this dashboard set", by_cookie=True)
        return self._check(raw, by_cookie=True)

    def check_token(self, raw: str) -> Visitor:
        """A token typed into the login form."""
        return self._check(raw, by_cookie=True)

    def _check(self, raw: str, by_cookie: bool) -> Visitor:
        try:
            principal = self.tokens.principal(raw)
        except Unauthorized:
            raise Refused("the token is unknown, expired or revoked", by_cookie) from None
        return Visitor(principal, raw, by_cookie)

    @staticmethod
    def may_change(request: Request, visitor: Visitor, form_csrf: str | None) -> bool:
        """A state-changing request from this visitor is allowed: a bearer token needs
        nothing more; a cookie needs the CSRF token (header or form field) and, when the
        browser sent an ``Origin``, this host's."""
        if not visitor.by_cookie:
            return True
        presented = request.headers.get(session.CSRF_HEADER) or form_csrf
        return session.csrf_ok(visitor.token, presented) and \
            session.same_origin(request.headers.get("origin"), request.headers.get("host"))
