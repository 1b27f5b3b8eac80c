"""Deleting an app destroys its machines, leased ones too, and never answers 500."""

from __future__ import annotations

from pathlib import Path

from .broker_kit import in_process_cluster, machine


async def test_deleting_an_app_destroys_a_leased_machine_and_answers_202(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        worker = await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "leased", "org_slug": "personal"})
            leased = (await api.post("/v1/apps/leased/machines", json=machine())).json()
            free = (await api.post("/v1/apps/leased/machines", json=machine())).json()
            lease = await api.post(f"/v1/apps/leased/machines/{leased['id']}/lease",
                                   json={"ttl": 600})
            assert lease.status_code == 201, lease.text
            # The lease guards the machine against a client without its nonce ...
            refused = await api.delete(f"/v1/apps/leased/machines/{leased['id']}",
                                       params={"force": "true", "lease_override": "true"})
            assert refused.status_code == 409, refused.text
            # ... but not against its app going away.
            deleted = await api.delete("/v1/apps/leased")
            assert deleted.status_code == 202, deleted.text
            assert (await api.get("/v1/apps/leased")).status_code == 404
            for m in (leased, free):
                assert worker.machines.get(m["id"]).state in ("destroying", "destroyed")


async def test_an_unreachable_worker_makes_app_delete_a_503_and_keeps_the_app(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        worker = await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "gone", "org_slug": "personal"})
            created = await api.post("/v1/apps/gone/machines", json=machine())
            assert created.status_code == 200, created.text
            c.workers.remove(worker)
            await worker.stop()  # its row stays in the view: the broker still routes to it
            deleted = await api.delete("/v1/apps/gone")
            assert deleted.status_code == 503, deleted.text
            assert deleted.json()["status"] == "unavailable"
            assert "retry" in deleted.json()["error"]
            assert (await api.get("/v1/apps/gone")).status_code == 200
