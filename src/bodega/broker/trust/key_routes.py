"""``/v1/cluster/keys``: the gossip keyring, listed and rotated (admin tokens only).

``GET /v1/cluster/keys`` shows key ids (never keys), which one seals, and
which members hold and seal with each. ``POST /v1/cluster/keys/rotate`` runs
a rotation on this broker's registry node (install a new key on every
member, seal with it everywhere, remove the old ones: ``registry/gossipkeys.py``)
and answers when it is done: 409 if one is already running here, or naming
the members that did not take a step in time (the keyring then stays one
every live member gossips with). Mounted only on a broker with a registry node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.wire.public.gossip_keys import RotateRequest
from bodega.wire.transport.http import RouteMaker, json_response, read_model

if TYPE_CHECKING:
    from bodega.registry.gossipkeys import GossipKeys


def key_routes(r: RouteMaker, keys: GossipKeys) -> list[Route]:
    async def listing(request: Request, who: Principal) -> Response:
        who.check_admin("cluster keys")
        return json_response(keys.listing().model_dump(mode="json"))

    async def rotate(request: Request, who: Principal) -> Response:
        who.check_admin("a gossip key rotation")
        body = await read_model(request, RotateRequest, required=False)
        rotation = await keys.rotate(timeout=body.timeout)
        return json_response(rotation.model_dump(mode="json"))

    return [r("/v1/cluster/keys", listing, "GET", gated=False),
            r("/v1/cluster/keys/rotate", rotate, "POST", gated=False)]
