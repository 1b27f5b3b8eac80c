"""App secret keys in a real cluster: set, generated and used through the broker, never shown.

A worker and a broker, each its own process, joined by gossip; keys live in the
registry's SQLite replicas. Every key is used through the API and its result checked
independently (HMAC by hand, Ed25519 with the published public key); afterwards every
file the cluster wrote is searched for the material that was set.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .fleet_kit import fleet, serving, until
from .test_secrets_cluster import files_holding


async def test_secret_keys_are_used_in_the_cluster_and_never_leave_it(tmp_path: Path) -> None:
    material = os.urandom(32)
    async with fleet(tmp_path) as f:
        await f.worker(f"kw-{os.getpid() % 10000}", 1)
        await f.broker()
        async with f.api() as api:
            await until(lambda: serving(api))
            for app in ("vault", "other"):
                await api.post("/v1/apps", json={"app_name": app, "org_slug": "personal"})
            keys = "/v1/apps/vault/secretkeys"

            # set: an hs256 key from given material signs as HMAC-SHA256 with it
            made = await api.post(f"{keys}/mac", json={"type": "hs256", "value": list(material)})
            assert made.status_code == 201, made.text
            assert made.json()["type"] == "hs256"
            assert made.json()["version"] >= 1
            signed = await api.post(f"{keys}/mac/sign", json={"plaintext": list(b"hello")})
            assert bytes(signed.json()["signature"]) == hmac.new(material, b"hello",
                                                                 hashlib.sha256).digest()
            ok = await api.post(f"{keys}/mac/verify", json={
                "plaintext": list(b"hello"), "signature": signed.json()["signature"]})
            assert ok.status_code == 204
            bad = await api.post(f"{keys}/mac/verify", json={
                "plaintext": list(b"hellO"), "signature": signed.json()["signature"]})
            assert bad.status_code == 400
            assert bad.json()["status"] == "invalid_argument"

            # generate: an xaes256gcm key encrypts and decrypts, bound to associated data
            gen = await api.post(f"{keys}/box/generate", json={"type": "xaes256gcm"})
            assert gen.status_code == 201, gen.text
            sealed = (await api.post(f"{keys}/box/encrypt", json={
                "plaintext": list(b"attack at dawn"), "associated_data": [1, 2]})).json()
            opened = await api.post(f"{keys}/box/decrypt", json={
                "ciphertext": sealed["ciphertext"], "associated_data": [1, 2]})
            assert bytes(opened.json()["plaintext"]) == b"attack at dawn"
            wrong_ad = await api.post(f"{keys}/box/decrypt", json={
                "ciphertext": sealed["ciphertext"], "associated_data": [9]})
            assert wrong_ad.status_code == 400
            wrong_use = await api.post(f"{keys}/box/sign", json={"plaintext": [1]})
            assert wrong_use.status_code == 400
            assert "encrypts and decrypts" in wrong_use.text

            # nacl_sign: a third party verifies with the public key the API shows
            await api.post(f"{keys}/ed/generate", json={"type": "nacl_sign"})
            shown = (await api.get(f"{keys}/ed")).json()
            signature = (await api.post(f"{keys}/ed/sign", json={
                "plaintext": list(b"release-7")})).json()["signature"]
            Ed25519PublicKey.from_public_bytes(bytes(shown["public_key"])).verify(
                bytes(signature), b"release-7")

            listed = (await api.get(keys)).json()["secret_keys"]
            assert [(k["name"], k["type"]) for k in listed] == [
                ("box", "xaes256gcm"), ("ed", "nacl_sign"), ("mac", "hs256")]
            assert [k["name"] for k in (await api.get(keys, params={
                "types": "hs256,nacl_sign"})).json()["secret_keys"]] == ["ed", "mac"]
            for answer in (made, gen, shown, listed):
                assert "value" not in str(answer)
                assert base64.b64encode(material).decode() \
                    not in str(answer)
            # min_version: a version this broker has not seen is a 412, not an old answer
            ahead = await api.get(f"{keys}/mac", params={"min_version": "999"})
            assert ahead.status_code == 412
            assert (await api.get(f"{keys}/mac", params={"min_version": "1"})).status_code == 200

            # another app's token cannot see or use these keys
            other = (await api.post("/v1/apps/other/deploy_token", json={})).json()["token"]
            async with httpx.AsyncClient(base_url=str(api.base_url), headers={
                    "authorization": f"Bearer {other}"}) as outsider:
                for call in (outsider.get(keys), outsider.post(f"{keys}/mac/sign", json={
                        "plaintext": [1]})):
                    assert (await call).status_code == 404

            # refusals: unknown type, unsupported type, bad bytes, bad name; none writes a key
            for name, body in (("x", {"type": "rsa", "value": [1]}),
                               ("x", {"type": "nacl_secretbox", "value": [1] * 32}),
                               ("x", {"type": "hs256", "value": [256]}),
                               ("bad-name", {"type": "hs256", "value": [1]}),
                               ("x", {"type": "hs256"})):
                refused = await api.post(f"{keys}/{name}", json=body)
                assert refused.status_code == 400, (body, refused.text)
                assert refused.json()["status"] == "invalid_argument"
            assert len((await api.get(keys)).json()["secret_keys"]) == 3

            deleted = await api.delete(f"{keys}/mac")
            assert deleted.status_code == 200
            assert deleted.json()["version"] > made.json()[
                "version"]
            assert (await api.post(f"{keys}/mac/sign", json={"plaintext": [1]})
                    ).status_code == 404
            assert (await api.delete("/v1/apps/vault")).status_code < 300
            await api.post("/v1/apps", json={"app_name": "vault", "org_slug": "personal"})
            assert (await api.get(keys)).json() == {"secret_keys": []}
    assert files_holding(tmp_path, material) == []
    assert files_holding(tmp_path, base64.b64encode(material)) == []
