"""A fork, or a volume made from a snapshot, that names no region goes to its data's
region, not the broker's default region; one that names a region goes there, its worker
fetching the snapshot from the host that holds it."""

from __future__ import annotations

from pathlib import Path

from .broker_kit import in_process_cluster


async def test_a_copy_naming_no_region_is_made_in_its_data_s_region(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1", region="ams")
        await c.add_worker("syd-1", region="syd")
        await c.add_broker()  # its default region is ams
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "kept", "org_slug": "personal"})
            made = await api.post("/v1/apps/kept/volumes",
                                  json={"name": "data", "size_gb": 2, "region": "syd"})
            assert made.status_code == 200, made.text
            source = made.json()["id"]
            taken = await api.post(f"/v1/apps/kept/volumes/{source}/snapshots")
            assert taken.status_code == 200, taken.text
            c.sync()
            forked = await api.post("/v1/apps/kept/volumes",
                                    json={"name": "fork", "source_volume_id": source})
            restored = await api.post("/v1/apps/kept/volumes",
                                      json={"name": "restored",
                                            "snapshot_id": taken.json()["id"]})
            for copy in (forked, restored):
                assert copy.status_code == 200, copy.text
                assert (copy.json()["region"], copy.json()["zone"],
                        copy.json()["size_gb"]) == ("syd", "syd-1", 2)
            # A region named is the one asked: the data goes there.
            (syd,) = [w for w in c.workers if w.config.name == "syd-1"]
            (syd.config.volume_dir(source) / "table").write_bytes(b"rows" * 1000)
            elsewhere = await api.post("/v1/apps/kept/volumes",
                                       json={"name": "far", "region": "ams",
                                             "source_volume_id": source})
            assert elsewhere.status_code == 200, elsewhere.text
            assert (elsewhere.json()["region"], elsewhere.json()["zone"]) == ("ams", "ams-1")
            (ams,) = [w for w in c.workers if w.config.name == "ams-1"]
            copied = ams.config.volume_dir(elsewhere.json()["id"]) / "table"
            assert copied.read_bytes() == b"rows" * 1000
