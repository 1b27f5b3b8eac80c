"""OpenID Connect identity tokens for machines, signed with a key every broker derives alike.

``POST /v1/tokens/oidc`` gives a machine (calling with its own token) a JWT saying who
it is: ``sub`` is ``<org>:<app>:<machine name>``, ``aud`` what it asked for (default the
issuer), ``iss`` the broker's URL as the caller reached it, valid for ten minutes. The
signing key is an ES256 (P-256) key made from ``identity_keys``' seed (the cluster
secret through HKDF, ``runtime/identity_keys.py``), so every broker signs with the same
key and nothing is stored; its public half is served as a
JWKS at ``/.well-known/jwks.json`` (and named by ``/.well-known/openid-configuration``),
so a third party verifies a machine's token offline with any JOSE library.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from bodega.model.answer import Answer
from bodega.model.machine import Machine

TTL = 600
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


class Jwk(Answer):
    kty: str
    crv: str
    x: str
    y: str
    use: str
    alg: str
    kid: str


class Jwks(Answer):
    keys: list[Jwk]


class Discovery(Answer):
    issuer: str
    jwks_uri: str
    response_types_supported: list[str]
    subject_types_supported: list[str]
    id_token_signing_alg_values_supported: list[str]
    claims_supported: list[str]


class IdentityClaims(Answer):
    """What a machine's identity token says (Fly's claim names)."""

    iss: str
    sub: str
    aud: str
    iat: int
    nbf: int
    exp: int
    jti: str
    org_name: str
    app_name: str
    machine_id: str
    machine_name: str
    machine_version: str | None = None
    region: str | None = None
    image: str | None = None
    image_digest: str | None = None


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class OidcKey:
    def __init__(self, seed: bytes) -> None:
        """``seed``: ``identity_keys(...).oidc_seed`` (``runtime/identity_keys.py``)."""
        scalar = int.from_bytes(seed, "big") % (P256_ORDER - 1) + 1
        self._private = ec.derive_private_key(scalar, ec.SECP256R1())
        numbers = self._private.public_key().public_numbers()
        self._x, self._y = numbers.x.to_bytes(32, "big"), numbers.y.to_bytes(32, "big")
        der = self._private.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        self.kid = b64url(hashlib.sha256(der).digest())[:16]

    def jwks(self) -> Jwks:
        return Jwks(keys=[Jwk(kty="EC", crv="P-256", x=b64url(self._x), y=b64url(self._y),
                              use="sig", alg="ES256", kid=self.kid)])

    def sign(self, claims: IdentityClaims) -> str:
        header = json.dumps({"alg": "ES256", "typ": "JWT", "kid": self.kid},
                            separators=(",", ":")).encode()
        signing_input = f"{b64url(header)}.{b64url(claims.wire())}"
        der = self._private.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return f"{signing_input}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def discovery(issuer: str) -> Discovery:
    return Discovery(issuer=issuer, jwks_uri=f"{issuer}/.well-known/jwks.json",
                     response_types_supported=["id_token"],
                     subject_types_supported=["public"],
                     id_token_signing_alg_values_supported=["ES256"],
                     claims_supported=list(IdentityClaims.model_fields))


def machine_claims(machine: Machine, app: str, org: str, issuer: str, audience: str | None,
                   now: int) -> IdentityClaims:
    """The claims of ``machine``'s identity token, issued at ``now`` (seconds)."""
    name = machine.name or machine.id
    return IdentityClaims(
        iss=issuer, sub=f"{org}:{app}:{name}", aud=audience or issuer, iat=now, nbf=now,
        exp=now + TTL, jti=str(uuid.uuid4()), org_name=org, app_name=app,
        machine_id=machine.id, machine_name=name, machine_version=machine.instance_id or None,
        region=machine.region or None,
        image=machine.config.image if machine.config else None,
        image_digest=machine.image_ref.digest or None if machine.image_ref else None)
