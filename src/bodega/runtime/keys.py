"""Keys derived from the cluster secret, one per purpose, so no raw secret crosses the wire."""

from __future__ import annotations

import hashlib
import hmac


def derive_key(secret: str, purpose: str) -> bytes:
    return hmac.new(secret.encode(), f"bodega/{purpose}".encode(), hashlib.sha256).digest()


def internal_token(secret: str) -> str:
    """The bearer token cluster members present to each other's internal APIs."""
    return derive_key(secret, "internal-api").hex()
