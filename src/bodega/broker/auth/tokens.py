"""Who is calling: admin tokens from the broker's configuration, app tokens from the view.

Tokens are never stored, only their SHA-256: the broker's admin tokens are
hashed at start-up, and app tokens (``POST /v1/apps/{app}/deploy_token``) are
shared rows of the view holding the hash and the scope. An app token sees
and touches only its app; anything else about other apps is "not found", so
a token cannot even learn which other apps exist. An app token asking for
what only an admin may do (creating apps, metrics, the cluster's members and
workers) is known but not allowed: 403.

Two more kinds act for one app: a machine's own token (``runtime/machine_tokens.py``,
checked by its tag and by the machine still existing in its app), and a KMS token
(``POST /v1/tokens/kms``: short-lived, stored hashed like app tokens, good for the
app's secret keys and nothing else).

App tokens expire: in 90 days unless created with another ``expiry``. A
source address that keeps failing to authenticate gets 429 with
``Retry-After`` instead of 401 for a while (``limit.py``); a request
with a valid token always gets through.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from bodega.broker.auth.core.limit import FailureLimiter
from bodega.broker.view.catalog import Catalog
from bodega.model.duration import parse_duration
from bodega.model.errors import BadRequest, Forbidden, NotFound, TooManyRequests, Unauthorized
from bodega.model.ids import new_token_id
from bodega.model.machine import Machine
from bodega.model.rows import AppRow, TokenRow
from bodega.runtime.machine_tokens import MachineTokens
from bodega.wire.transport.http import bearer_token

TOKEN_PREFIX = "bdg_"
KMS_PREFIX = "bdk_"
KMS_TTL = 3600.0
DEFAULT_EXPIRY = 90 * 24 * 3600.0  # an app token lasts 90 days unless asked otherwise


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    token_id: str
    admin: bool
    app: str | None = None  # the one app an app token may use
    machine: str | None = None  # a machine's own token: the machine it is
    kms: bool = False  # a KMS token: the app's secret keys only
    expires_at: float | None = None

    @property
    def kind(self) -> str:
        return "admin" if self.admin else "kms" if self.kms else "machine" if self.machine \
            else "app"

    def can(self, app: str) -> bool:
        return self.admin or self.app == app

    def check(self, app: str) -> None:
        if not self.can(app):
            raise NotFound(f"app not found: {app}")

    def check_path(self, path: str) -> None:
        """A KMS token opens the secret keys of its app and nothing else."""
        if self.kms and not (path.startswith(f"/v1/apps/{self.app}/secretkeys")
                             or path == "/v1/tokens/current"):
            raise Forbidden("permission_denied: a KMS token is good for its app's secret keys "
                            "only")

    def check_admin(self, what: str) -> None:
        if not self.admin:
            raise Forbidden(f"permission_denied: {what} needs an admin token")


class Tokens:
    def __init__(self, catalog: Catalog, admin_tokens: tuple[str, ...],
                 machine_tokens: MachineTokens | None = None,
                 limiter: FailureLimiter | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.catalog = catalog
        self._admin = [token_hash(t) for t in admin_tokens if t]
        self.machine_tokens = machine_tokens
        self.limiter = limiter or FailureLimiter()
        self.clock = clock

    def authenticate(self, request: HTTPConnection) -> Principal:
        """Who sent ``request``; 401 if no one we know, 429 once its address has failed too
        often (a valid token is never refused for its address's failures)."""
        try:
            return self._principal(request)
        except Unauthorized:
            address = request.client.host if request.client else "unknown"
            now = self.clock()
            wait = self.limiter.retry_after(address, now)
            if wait is not None:
                raise TooManyRequests(f"too many failed authentications from {address}; "
                                      f"retry in {math.ceil(wait)}s", retry_after=wait) from None
            self.limiter.failed(address, now)
            raise

    def _principal(self, request: HTTPConnection) -> Principal:
        raw = bearer_token(request)
        if raw is None:
            raise Unauthorized("unauthorized: send Authorization: Bearer <token>")
        return self.principal(raw)

    def principal(self, raw: str) -> Principal:
        """Who ``raw`` is (the dashboard's login and cookie use it too); Unauthorized if
        nobody."""
        claim = self.machine_tokens.claim(raw) if self.machine_tokens else None
        if claim is not None:
            machine = self.catalog.get(Machine, claim.machine_id)
            if machine is None or machine.app != claim.app or machine.state == "destroyed":
                raise Unauthorized(f"unauthorized: machine {claim.machine_id} of {claim.app} "
                                   "is not known here (destroyed, or not heard of yet)")
            return Principal(f"machine-{claim.machine_id}", admin=False, app=claim.app,
                             machine=claim.machine_id)
        digest = token_hash(raw)
        for i, known in enumerate(self._admin):
            if hmac.compare_digest(digest, known):
                return Principal(f"admin-{i}", admin=True)
        for row in self.catalog.rows(TokenRow, token_hash=digest):
            expires = row.expires_at
            if expires and expires < time.time():
                continue
            if row.scope == "admin":
                return Principal(row.id, admin=True)
            kind, _, app = row.scope.partition(":")
            if kind in ("app", "kms") and self.catalog.get(AppRow.TABLE, app) is not None:
                return Principal(row.id, admin=False, app=app, kms=kind == "kms",
                                 expires_at=expires or None)
        raise Unauthorized("unauthorized: the token is unknown, expired or revoked")

    def create_app_token(self, app: str, expiry: str | None) -> str:
        """A new token for ``app``; only its hash is kept."""
        try:
            ttl = parse_duration(expiry, DEFAULT_EXPIRY) if expiry else DEFAULT_EXPIRY
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: expiry: {exc}") from None
        return self._issue(TOKEN_PREFIX, f"app:{app}", ttl)

    def create_kms_token(self, app: str) -> str:
        """A token for ``app``'s secret keys only, for an hour; only its hash is kept."""
        return self._issue(KMS_PREFIX, f"kms:{app}", KMS_TTL)

    def _issue(self, prefix: str, scope: str, ttl: float) -> str:
        raw = prefix + secrets.token_urlsafe(32)
        token_id = new_token_id("tok")
        now = time.time()
        row = TokenRow(id=token_id, token_hash=token_hash(raw), scope=scope, created_at=now,
                       expires_at=now + ttl)
        self.catalog.put_shared(TokenRow.TABLE, token_id, row.doc())
        return raw

    def revoke_app_tokens(self, app: str) -> None:
        for scope in (f"app:{app}", f"kms:{app}"):
            for row in self.catalog.rows(TokenRow, scope=scope):
                self.catalog.delete_shared(TokenRow.TABLE, row.id)
