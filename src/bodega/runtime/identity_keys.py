"""The keys a machine's identity rests on, derived in one place from one key.

A machine's token (``machine_tokens.py``) is an HMAC under ``machine_token``; its
OIDC identity tokens (``broker/oidc.py``) are signed with the ES256 key
``oidc_seed`` seeds. ``identity_keys`` is the only derivation of both, and takes the
key bytes as a parameter: today every caller (the broker's daemon and the worker's
effects) passes the cluster secret's bytes, so a cluster that keys identities with
something else changes what those callers pass, and nothing here. The derivations
are the ones tokens were first minted with, so tokens and the JWKS stay the same.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


@dataclass(frozen=True)
class IdentityKeys:
    machine_token: bytes  # HMAC-SHA256 key of machine tokens
    oidc_seed: bytes  # 48 bytes the ES256 signing key is made from


def identity_keys(key: bytes) -> IdentityKeys:
    """Both identity keys from ``key`` (today: the cluster secret, encoded)."""
    return IdentityKeys(
        machine_token=hmac.new(key, b"bodega/machine-token", hashlib.sha256).digest(),
        oidc_seed=HKDF(algorithm=hashes.SHA256(), length=48, salt=b"bodega-oidc",
                       info=b"bodega/oidc/es256/v1").derive(key),
    )
