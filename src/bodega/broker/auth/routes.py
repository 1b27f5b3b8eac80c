"""The Machines API's ``/v1/tokens`` routes, and the OIDC discovery documents beside them.

``authenticate`` and ``authorize`` introspect a token a service was handed (in the
body's ``header``, as ``Bearer``/``FlyV1`` or bare) for whoever calls with a token of
its own; ``current`` describes the caller's; ``kms`` issues the caller's app a token
for its secret keys; ``oidc`` issues the calling machine its identity token.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.core.oidc import OidcKey, discovery, machine_claims
from bodega.broker.auth.scope import action_bits, caveats, denial
from bodega.broker.auth.tokens import Principal, Tokens
from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import Catalog
from bodega.model.errors import BadRequest, BodegaError, Forbidden
from bodega.model.machine import Machine
from bodega.model.rows import AppRow
from bodega.model.volume import Volume
from bodega.wire.public import tokens as wire
from bodega.wire.transport.http import RouteMaker, answer_response, read_model


def _issuer(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def verified(tokens: Tokens, header: str) -> tuple[Principal, wire.VerifiedToken]:
    scheme, _, value = header.strip().partition(" ")
    raw = value.strip() if scheme.lower() in ("bearer", "flyv1") else header.strip()
    if not raw:
        raise BadRequest("invalid_argument: header: send the token (Bearer TOKEN, or bare)")
    try:
        who = tokens.principal(raw)
    except BodegaError:
        raise BadRequest("invalid_argument: header: the token is unknown, expired or "
                         "revoked") from None
    return who, wire.VerifiedToken(caveats=wire.CaveatSet(caveats=caveats(who)))


def token_routes(r: RouteMaker, tokens: Tokens, apps: Apps, catalog: Catalog,
                 key: OidcKey) -> list[Route]:
    def info(who: Principal) -> wire.TokenInfo:
        row = apps.catalog.get(AppRow, who.app) if who.app else None
        org = row.org_slug if row is not None else None
        return wire.TokenInfo(token_id=who.token_id, apps=[who.app] if who.app else None,
                              org_slug=org, organization=org,
                              restricted_to_machine=who.machine, source_machine_id=who.machine,
                              user="admin" if who.admin else None)

    async def authenticate(request: Request, who: Principal) -> Response:
        body = await read_model(request, wire.AuthenticateTokenRequest)
        _, token = verified(tokens, body.header)
        return answer_response([token])

    async def authorize(request: Request, who: Principal) -> Response:
        body = await read_model(request, wire.AuthorizeTokenRequest)
        subject, token = verified(tokens, body.header)
        access = body.access
        bits = action_bits(access.action)
        machine = catalog.get(Machine, access.machine_id) if access.machine_id else None
        if machine is not None and machine.state == "destroyed":
            machine = None
        volume = catalog.get(Volume, access.volume_id) if access.volume_id else None
        app = access.app_name or (machine.app if machine else None) or \
            (volume.app if volume else None)
        row = catalog.get(AppRow, app) if app else None
        why = denial(subject, access, machine_app=machine.app if machine else None,
                     volume_app=volume.app if volume else None,
                     app_org=row.org_slug if row is not None else None)
        if why is not None:
            raise Forbidden(f"permission_denied: {why}")
        return answer_response(wire.AuthorizeResponse(verified_token=token, access=wire.Access(
            action=bits, machine=access.machine_id, volume=access.volume_id,
            app_feature=access.app_feature, machine_feature=access.machine_feature,
            command=access.command, sourceMachine=access.source_machine)))

    async def current(request: Request, who: Principal) -> Response:
        return answer_response(wire.CurrentTokenResponse(tokens=[info(who)]))

    async def kms(request: Request, who: Principal) -> Response:
        if who.app is None:
            raise BadRequest("invalid_argument: a KMS token is for one app: ask with that "
                             "app's token or one of its machines'")
        if who.kms:
            raise Forbidden("permission_denied: a KMS token cannot issue another")
        return Response(tokens.create_kms_token(who.app), media_type="text/plain")

    async def oidc(request: Request, who: Principal) -> Response:
        body = await read_model(request, wire.CreateOIDCTokenRequest, required=False)
        if who.machine is None or who.app is None:
            raise BadRequest("invalid_argument: an OIDC token names the machine that asks: "
                             "call with the machine's own token (BODEGA_MACHINE_TOKEN)")
        machine = catalog.get(Machine, who.machine)
        org = apps.require(who.app).org_slug
        if machine is None:  # gone since the token was checked
            raise BadRequest(f"invalid_argument: machine {who.machine} is gone")
        claims = machine_claims(machine, who.app, org, _issuer(request), body.aud,
                                int(time.time()))
        return Response(key.sign(claims), media_type="text/plain")

    return [
        r("/v1/tokens/authenticate", authenticate, "POST"),
        r("/v1/tokens/authorize", authorize, "POST"),
        r("/v1/tokens/current", current, "GET"),
        r("/v1/tokens/kms", kms, "POST"),
        r("/v1/tokens/oidc", oidc, "POST"),
    ]


def well_known_routes(key: OidcKey) -> list[Route]:
    """Open to anyone: what a third party needs to verify a machine's identity token."""
    async def configuration(request: Request) -> Response:
        return answer_response(discovery(_issuer(request)))

    async def jwks(request: Request) -> Response:
        return answer_response(key.jwks())

    return [Route("/.well-known/openid-configuration", configuration, methods=["GET"]),
            Route("/.well-known/jwks.json", jwks, methods=["GET"])]
