"""``GET /v1/cluster``: the broker tells any client of the cluster where its image registry is,
and the CA its certificate chains to."""

from __future__ import annotations

from pathlib import Path

from .broker_kit import in_process_cluster

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


async def test_any_token_learns_the_registry_and_no_token_does_not(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker(image_registry="127.0.0.1:5999", image_registry_ca=CA)
        told = {"image_registry": "127.0.0.1:5999", "image_registry_ca": CA}
        async with c.api() as admin:
            assert (await admin.get("/v1/cluster")).json() == told
            await admin.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
            deploy_token = (await admin.post("/v1/apps/web/deploy_token", json={})).json()["token"]
        # An app's deploy token may ask too (it names images there; pushes want the admin
        # token: docs/security.md).
        async with c.api(token=deploy_token) as app:
            assert (await app.get("/v1/cluster")).json() == told
        async with c.api(token=None) as nobody:
            refused = await nobody.get("/v1/cluster")
            assert refused.status_code == 401
            assert refused.json()["status"] == "unauthenticated"


async def test_a_cluster_without_a_registry_says_so(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as admin:
            assert (await admin.get("/v1/cluster")).json() == {"image_registry": None,
                                                                "image_registry_ca": None}
