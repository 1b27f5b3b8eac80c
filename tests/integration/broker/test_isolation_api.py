"""Isolation through the broker: an unknown one is a 400, one no worker offers a 412."""

from __future__ import annotations

from pathlib import Path

from .broker_kit import in_process_cluster, machine

IMAGE = "127.0.0.1:5000/web:1"


async def test_isolation_is_checked_then_placed_only_where_offered(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_worker("ams-2")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "iso", "org_slug": "personal"})

            def asking(isolation: str, image: str = IMAGE) -> dict[str, object]:
                return machine(config={"image": image, "guest": {
                    "cpus": 1, "memory_mb": 256, "isolation": isolation}})

            unknown = await api.post("/v1/apps/iso/machines", json=asking("kata"))
            assert unknown.status_code == 400, unknown.text
            error = unknown.json()["error"]
            assert "\n" not in error
            assert "isolation" in error
            assert "'container', 'sandbox' or 'vm'" in error

            small = machine(config={"image": IMAGE, "guest": {
                "cpus": 1, "memory_mb": 64, "isolation": "vm"}})
            too_small = await api.post("/v1/apps/iso/machines", json=small)
            assert too_small.status_code == 400, too_small.text
            assert "\n" not in too_small.json()["error"]
            assert "memory_mb" in too_small.json()["error"]

            process = await api.post("/v1/apps/iso/machines",
                                     json=asking("sandbox", image="process"))
            assert process.status_code == 400, process.text
            assert "runs an image" in process.json()["error"]

            for isolation in ("vm", "sandbox"):
                refused = await api.post("/v1/apps/iso/machines", json=asking(isolation))
                assert refused.status_code == 412, refused.text
                body = refused.json()
                assert body["status"] == "insufficient_capacity"
                assert f"no worker in ams offers isolation {isolation}" in body["error"]
                assert "(2 isolation)" in body["error"]
                region = body["details"]["placement"]["regions"][0]
                assert region["refused"] == {"isolation": 2}
                assert {r["reason"] for r in region["refusals"]} == {
                    f"isolation {isolation} not offered"}

            placed = await api.post("/v1/apps/iso/machines", json=asking("container"))
            assert placed.status_code == 200, placed.text
            assert placed.json()["config"]["guest"]["isolation"] == "container"
            workers = (await api.get("/v1/cluster/workers")).json()
            assert {tuple(w["totals"]["isolations"]) for w in workers} == {("container",)}
