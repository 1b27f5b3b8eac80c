"""``GET /v1/cluster``: the broker tells any client of the cluster where its image registries
are (every live one the workers advertise, its own first), and the CA they chain to."""

from __future__ import annotations

from pathlib import Path

from bodega.model.rows import WorkerRow

from .broker_kit import in_process_cluster

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


async def test_any_token_learns_the_registry_and_no_token_does_not(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker(image_registry="127.0.0.1:5999", image_registry_ca=CA)
        told = {"image_registry": "127.0.0.1:5999", "image_registry_ca": CA,
                "image_registries": ["127.0.0.1:5999"]}
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
            assert (await admin.get("/v1/cluster")).json() == {
                "image_registry": None, "image_registry_ca": None, "image_registries": []}


async def test_every_live_registry_is_listed_its_own_first_and_a_lost_hosts_left_out(
        tmp_path: Path) -> None:
    """Each server host's workers advertise its registry in their rows; the broker lists
    those membership calls live (alive or suspect), its own host's first, so a push never
    waits on a lost host, and names the first as ``image_registry`` for older clients."""
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker(image_registry="10.0.0.1:5000", image_registry_ca=CA)
        row = c.catalog.get(WorkerRow, "ams-1")
        assert row is not None
        for name, registry, status in (("ams-1", "10.0.0.1:5000", "alive"),
                                       ("syd-1", "10.0.0.2:5000", "suspect"),
                                       ("lon-1", "10.0.0.3:5000", "alive"),
                                       ("fra-1", "10.0.0.4:5000", "dead")):
            c.catalog.put(WorkerRow.TABLE, name, row.model_copy(update={
                "name": name, "image_registry": registry}).doc())
            c.catalog.set_status(name, status)
        async with c.api() as admin:
            told = (await admin.get("/v1/cluster")).json()
            assert told["image_registries"] == ["10.0.0.1:5000", "10.0.0.2:5000",
                                                "10.0.0.3:5000"]
            assert told["image_registry"] == "10.0.0.1:5000"
            c.catalog.set_status("ams-1", "dead")  # the broker's own host's registry lost
            told = (await admin.get("/v1/cluster")).json()
            assert told["image_registries"] == ["10.0.0.2:5000", "10.0.0.3:5000"]
            assert told["image_registry"] == "10.0.0.2:5000"
