"""The broker's internal listener: mutual TLS, for the cluster's members only.

The public listener (the Machines API) takes bearer tokens from clients;
nothing a member calls is served there. Here, each route behind its rule in
``bodega.runtime.tls.core.access``:

- ``GET /v1/health``: who answers (any certificate of the cluster);
- the registry's digest, sync and subscription routes (members);
- ``POST /v1/cluster/certificates``: a renewal. The body is a CSR; the
  answer a certificate for the caller's own identity (the one its current
  certificate names, at most its addresses), from the cluster CA, when this
  broker holds the CA's key (``--ca-key``). Any other broker answers 404.
  This is the seam a join uses too: the same ``CertificateAuthority.sign``,
  granted by a join token instead of a certificate.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from bodega.model.errors import BadRequest, Forbidden, NotFound
from bodega.runtime.tls.authority import CertificateAuthority, CertificateRequest
from bodega.runtime.tls.core.identity import Refused
from bodega.wire.internal.cert_client import CERTIFICATES_PATH
from bodega.wire.transport.http import json_response, not_found_app_handler, read_model
from bodega.wire.transport.peer_access import PeerAccess, peer_of


def internal_app(access: PeerAccess, name: str, authority: CertificateAuthority | None,
                 registry_routes: list[BaseRoute]) -> Starlette:
    async def health(request: Request) -> Response:
        return json_response({"ok": True, "name": name})

    async def certificates(request: Request) -> Response:
        if authority is None:
            raise NotFound(f"not found: broker {name} signs no certificates (no --ca-key)")
        body = await read_model(request, CertificateRequest)
        peer = peer_of(request)
        if peer is None:
            raise Forbidden("permission_denied: certificates are renewed over mutual TLS only")
        try:
            issued = authority.renew(body.csr.encode(), peer.certificate)
        except Refused as exc:  # a bad CSR is the caller's mistake; the rest, not its right
            raise (BadRequest if exc.reason == "malformed" else Forbidden)(
                f"certificate refused: {exc}") from None
        return json_response(issued.model_dump(mode="json"))

    routes: list[BaseRoute] = [access.route("/v1/health", health, "GET"),
                               access.route(CERTIFICATES_PATH, certificates, "POST"),
                               *registry_routes]
    return Starlette(routes=routes, exception_handlers={404: not_found_app_handler,
                                                        405: not_found_app_handler})
