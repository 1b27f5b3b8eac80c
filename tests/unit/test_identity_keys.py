"""The identity keys come from the key bytes they are given, by the derivations tokens
were first minted with: the same key gives the same tokens and JWKS, another key others."""

from __future__ import annotations

import hashlib
import hmac

from bodega.broker.auth.core.oidc import OidcKey
from bodega.runtime.identity_keys import identity_keys
from bodega.runtime.machine_tokens import MachineTokens


def test_machine_tokens_keep_the_first_derivation() -> None:
    first = hmac.new(b"s3cret", b"bodega/machine-token", hashlib.sha256).digest()
    assert identity_keys(b"s3cret").machine_token == first


def test_the_keys_follow_the_key_bytes_given() -> None:
    one, other = identity_keys(b"one"), identity_keys(b"other")
    token = MachineTokens(one.machine_token).mint("app", "0123456789abcd")
    assert MachineTokens(identity_keys(b"one").machine_token).claim(token) is not None
    assert MachineTokens(other.machine_token).claim(token) is None
    assert OidcKey(one.oidc_seed).jwks() == OidcKey(identity_keys(b"one").oidc_seed).jwks()
    assert OidcKey(one.oidc_seed).kid != OidcKey(other.oidc_seed).kid
