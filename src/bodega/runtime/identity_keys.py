"""The keys a machine's identity rests on, derived in one place from one key.

A machine's token (``machine_tokens.py``) is an HMAC under ``machine_token``; its
OIDC identity tokens (``broker/auth/core/oidc.py``) are signed with the ES256 key
``oidc_seed`` seeds; a jobs pass (``jobs/passes.py``) is an HMAC under ``job_pass``.
``identity_keys`` is the only derivation of them, and takes the
key bytes as a parameter: every caller (the broker's daemon and the worker's
effects) passes the cluster's secrets key, which only brokers and workers hold; a
cluster without one mints no machine identity. The derivations
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
    job_pass: bytes  # HMAC-SHA256 key of the passes a job's home takes submits with


def identity_keys(key: bytes) -> IdentityKeys:
    """The identity keys from ``key`` (the secrets key, encoded)."""
    return IdentityKeys(
        machine_token=hmac.new(key, b"bodega/machine-token", hashlib.sha256).digest(),
        oidc_seed=HKDF(algorithm=hashes.SHA256(), length=48, salt=b"bodega-oidc",
                       info=b"bodega/oidc/es256/v1").derive(key),
        job_pass=hmac.new(key, b"bodega/job-pass", hashlib.sha256).digest(),
    )
