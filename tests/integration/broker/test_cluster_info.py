"""``GET /v1/cluster``: the broker tells any client of the cluster where its image registry is."""

from __future__ import annotations

from pathlib import Path

from .broker_kit import in_process_cluster


async def test_any_token_learns_the_registry_and_no_token_does_not(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker(image_registry="127.0.0.1:5999")
        async with c.api() as admin:
            assert (await admin.get("/v1/cluster")).json() == {"image_registry": "127.0.0.1:5999"}
            await admin.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
            deploy_token = (await admin.post("/v1/apps/web/deploy_token", json={})).json()["token"]
        # An app's deploy token pushes its images too, so it may ask.
        async with c.api(token=deploy_token) as app:
            assert (await app.get("/v1/cluster")).json() == {"image_registry": "127.0.0.1:5999"}
        async with c.api(token=None) as nobody:
            refused = await nobody.get("/v1/cluster")
            assert refused.status_code == 401
            assert refused.json()["status"] == "unauthenticated"


async def test_a_cluster_without_a_registry_says_so(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as admin:
            assert (await admin.get("/v1/cluster")).json() == {"image_registry": None}
