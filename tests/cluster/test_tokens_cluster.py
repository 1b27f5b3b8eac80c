"""Tokens in a real cluster: introspection, scope checks, KMS tokens and machine identity.

A worker (process driver) and a broker, each its own process. A machine's own token is
read from the environment its worker gave its process (``/proc/PID/environ``); with it
the machine asks for an OIDC token, which the test verifies offline against the
broker's JWKS with ``cryptography`` alone, and uses its app's secret keys but no other
app's.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from .fleet_kit import TOKEN, echo_config, fleet, machine_pids, serving, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify_jwt(token: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """ES256 verified by hand: the key from the JWKS, the signature r||s over header.payload."""
    header_b64, payload_b64, signature_b64 = token.split(".")
    header = json.loads(unb64(header_b64))
    assert header["alg"] == "ES256"
    jwk = next(k for k in jwks["keys"] if k["kid"] == header["kid"])
    public = ec.EllipticCurvePublicNumbers(int.from_bytes(unb64(jwk["x"]), "big"),
                                           int.from_bytes(unb64(jwk["y"]), "big"),
                                           ec.SECP256R1()).public_key()
    raw = unb64(signature_b64)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{header_b64}.{payload_b64}".encode(), ec.ECDSA(hashes.SHA256()))
    return dict(json.loads(unb64(payload_b64)))


def as_token(api: httpx.AsyncClient, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=str(api.base_url), timeout=30,
                             headers={"authorization": f"Bearer {token}"})


async def test_tokens_are_introspected_and_a_machine_proves_who_it_is(tmp_path: Path) -> None:
    async with fleet(tmp_path) as f:
        await f.worker(f"tw-{os.getpid() % 10000}", 1)
        await f.broker()
        async with f.api() as api, httpx.AsyncClient(timeout=30) as anyone:
            await until(lambda: serving(api))
            await api.post("/v1/apps", json={"app_name": "ident", "org_slug": "acme"})
            await api.post("/v1/apps", json={"app_name": "other", "org_slug": "acme"})
            await api.post("/v1/apps/ident/secretkeys/mac/generate", json={"type": "hs256"})
            await api.post("/v1/apps/other/secretkeys/mac/generate", json={"type": "hs256"})
            app_token = (await api.post("/v1/apps/ident/deploy_token", json={})).json()["token"]

            # authenticate: who a token is, as caveats; an unknown token is a 400
            checked = await api.post("/v1/tokens/authenticate",
                                     json={"header": f"Bearer {app_token}"})
            assert checked.status_code == 200, checked.text
            assert checked.json()[0]["caveats"]["caveats"][0] == {
                "type": "apps", "body": {"apps": {"ident": 31}}}
            unknown = await api.post("/v1/tokens/authenticate", json={"header": "Bearer nope"})
            assert unknown.status_code == 400
            assert (await anyone.post(f"{api.base_url}/v1/tokens/authenticate",
                                      json={"header": app_token})).status_code == 401

            # authorize: the app token may act on its app, not on another, nor on the org
            def access(**fields: Any) -> dict[str, Any]:
                return {"header": f"FlyV1 {app_token}", "access": fields}

            ok = await api.post("/v1/tokens/authorize", json=access(app_name="ident",
                                                                     action="rw"))
            assert ok.status_code == 200, ok.text
            assert ok.json()["access"]["action"] == 3
            for denied in (access(app_name="other"), access(org_slug="acme"),
                           access(app_name="ident", org_slug="elsewhere"),
                           access(app_name="ident", org_feature="wg")):
                answer = await api.post("/v1/tokens/authorize", json=denied)
                assert answer.status_code == 403, (denied, answer.text)
                assert answer.json()["status"] == "permission_denied"
            bad_action = await api.post("/v1/tokens/authorize",
                                        json=access(app_name="ident", action="rx"))
            assert bad_action.status_code == 400
            admin_ok = await api.post("/v1/tokens/authorize", json={
                "header": TOKEN, "access": {"org_slug": "acme", "action": 31}})
            assert admin_ok.status_code == 200

            # current: the caller's own token
            async with as_token(api, app_token) as deployer:
                mine = (await deployer.get("/v1/tokens/current")).json()["tokens"][0]
                assert (mine["apps"], mine["org_slug"]) == (["ident"], "acme")
                # kms: a token for the app's secret keys and nothing else
                kms = await deployer.post("/v1/tokens/kms")
                assert kms.status_code == 200
                assert kms.headers["content-type"].startswith("text/plain")
            async with as_token(api, kms.text) as keyholder:
                signed = await keyholder.post("/v1/apps/ident/secretkeys/mac/sign",
                                              json={"plaintext": [1]})
                assert signed.status_code == 200, signed.text
                assert (await keyholder.get("/v1/apps/ident/machines")).status_code == 403
                assert (await keyholder.post("/v1/tokens/kms")).status_code == 403
            # the admin token is not an app's: no KMS token, no OIDC token
            assert (await api.post("/v1/tokens/kms")).status_code == 400
            assert (await api.post("/v1/tokens/oidc", json={})).status_code == 400

            # a machine's own token, from the environment its worker gave it
            m = (await api.post("/v1/apps/ident/machines", json={
                "name": "web-1", "config": echo_config(f"tokens-{uuid.uuid4().hex[:8]}")})).json()
            await api.get(f"/v1/apps/ident/machines/{m['id']}/wait", params={"state": "started"})
            pids = await until(lambda: machine_pids(m["id"]))
            environ = dict(line.split(b"=", 1) for line in
                           Path(f"/proc/{pids[0]}/environ").read_bytes().split(b"\0") if line)
            machine_token = environ[b"BODEGA_MACHINE_TOKEN"].decode()
            async with as_token(api, machine_token) as machine:
                # The broker knows the machine once the view has its row (gossip, a moment).
                async def known() -> httpx.Response | None:
                    answer = await machine.get("/v1/tokens/current")
                    return answer if answer.status_code == 200 else None

                whoami = await until(known, timeout=20)
                who = whoami.json()["tokens"][0]
                assert who["restricted_to_machine"] == m["id"]
                assert (await machine.post("/v1/apps/ident/secretkeys/mac/sign",
                                           json={"plaintext": [1]})).status_code == 200
                assert (await machine.post("/v1/apps/other/secretkeys/mac/sign",
                                           json={"plaintext": [1]})).status_code == 404
                jwt = await machine.post("/v1/tokens/oidc", json={"aud": "https://vault.example"})
                assert jwt.status_code == 200, jwt.text
            forged = machine_token[:-2] + ("AA" if not machine_token.endswith("AA") else "BB")
            async with as_token(api, forged) as impostor:
                assert (await impostor.get("/v1/tokens/current")).status_code == 401

            # a third party verifies it offline, from the published documents only
            base = str(api.base_url).rstrip("/")
            config = (await anyone.get(f"{base}/.well-known/openid-configuration")).json()
            jwks = (await anyone.get(config["jwks_uri"])).json()
            claims = verify_jwt(jwt.text, jwks)
            assert claims["iss"] == config["issuer"] == base
            assert claims["sub"] == "acme:ident:web-1"
            assert claims["aud"] == "https://vault.example"
            assert (claims["machine_id"], claims["app_name"]) == (m["id"], "ident")
            assert claims["exp"] > claims["iat"]
            header, _payload, signature = jwt.text.split(".")
            tampered = base64.urlsafe_b64encode(json.dumps(
                {**claims, "sub": "acme:other:x"}).encode()).decode().rstrip("=")
            with pytest.raises(InvalidSignature):
                verify_jwt(f"{header}.{tampered}.{signature}", jwks)

            # a destroyed machine's token is refused
            await api.delete(f"/v1/apps/ident/machines/{m['id']}", params={"force": "true"})

            async def refused() -> bool:
                async with as_token(api, machine_token) as gone:
                    return (await gone.get("/v1/tokens/current")).status_code == 401

            await until(refused)
