"""A volume made from a snapshot whose host cannot be reached says so (503), as a fork
of a volume on that host does: the snapshot exists, so "not found" would be wrong."""

from __future__ import annotations

from pathlib import Path

from bodega.worker.store import volume_queries

from .broker_kit import in_process_cluster


async def test_restoring_a_snapshot_on_an_unreachable_host_is_a_503(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_worker("ams-2")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "kept", "org_slug": "personal"})
            made = await api.post("/v1/apps/kept/volumes",
                                  json={"name": "data", "size_gb": 1, "region": "ams"})
            assert made.status_code == 200, made.text
            volume = made.json()["id"]
            # A second volume on the other host: the broker has a reachable host to ask.
            other = await api.post("/v1/apps/kept/volumes",
                                   json={"name": "data", "size_gb": 1, "region": "ams",
                                         "require_unique_zone": True})
            assert other.status_code == 200, other.text
            taken = await api.post(f"/v1/apps/kept/volumes/{volume}/snapshots")
            assert taken.status_code == 200, taken.text
            snapshot = taken.json()["id"]
            c.sync()
            # With every host answering, a snapshot none keeps is not found.
            missing = await api.post("/v1/apps/kept/volumes",
                                     json={"name": "copy", "region": "ams",
                                           "snapshot_id": "vs_nosuchsnapshot"})
            assert missing.status_code == 404, missing.text
            (holder,) = [w for w in c.workers if any(
                v.id == volume for v in volume_queries.list_volumes(w.store.db, None, True))]
            c.workers.remove(holder)
            await holder.stop()  # its rows stay in the view: a host lost, not gone

            restored = await api.post("/v1/apps/kept/volumes",
                                      json={"name": "copy", "region": "ams",
                                            "snapshot_id": snapshot})
            forked = await api.post("/v1/apps/kept/volumes",
                                    json={"name": "copy", "region": "ams",
                                          "source_volume_id": volume})
            for answer in (forked, restored):
                assert answer.status_code == 503, answer.text
                assert answer.json()["status"] == "unavailable", answer.text
                assert "unreachable" in answer.json()["error"], answer.text
            assert holder.config.name in restored.json()["error"], restored.text

