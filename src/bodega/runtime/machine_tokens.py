"""A machine's own token: who a machine is, provable to any broker, stored nowhere.

A worker gives every machine it launches ``BODEGA_MACHINE_TOKEN`` in its environment:
``bdm_<app>.<machine id>.<tag>``, the tag an HMAC of app and id under the key
``identity_keys`` derives for this one purpose (``identity_keys.py``). Any broker
checks the tag without a lookup, then that the machine exists in its app and is not
destroyed, so the token dies with its machine. With it a machine acts for its app as
an app token does, and is the one caller ``POST /v1/tokens/oidc`` issues an identity token to.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

from bodega.runtime.identity_keys import identity_keys

PREFIX = "bdm_"
ENV = "BODEGA_MACHINE_TOKEN"


@dataclass(frozen=True)
class MachineClaim:
    app: str
    machine_id: str


class MachineTokens:
    def __init__(self, key: bytes) -> None:
        """``key``: ``identity_keys(...).machine_token``."""
        self._key = key

    def _tag(self, app: str, machine_id: str) -> str:
        mac = hmac.new(self._key, f"{app}/{machine_id}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def mint(self, app: str, machine_id: str) -> str:
        return f"{PREFIX}{app}.{machine_id}.{self._tag(app, machine_id)}"

    def claim(self, raw: str) -> MachineClaim | None:
        """Whose token ``raw`` is, if its tag is this cluster's; None otherwise."""
        if not raw.startswith(PREFIX):
            return None
        parts = raw[len(PREFIX):].split(".")
        if len(parts) != 3 or not all(parts):
            return None
        app, machine_id, tag = parts
        if not hmac.compare_digest(tag.encode(), self._tag(app, machine_id).encode()):
            return None
        return MachineClaim(app, machine_id)


def keyed(secrets_key: str) -> MachineTokens | None:
    """The machine tokens a component holding ``secrets_key`` mints and checks (the key's
    one derivation: ``identity_keys.py``); None without a key: no machine identity."""
    return MachineTokens(identity_keys(secrets_key.encode()).machine_token) if secrets_key \
        else None
