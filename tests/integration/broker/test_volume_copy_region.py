"""A fork, or a volume made from a snapshot, that names no region goes where its data is:
the source's host, in the source's region, not the broker's default region (where no
host holds the data)."""

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
            # A region named is still the one asked: the data is not there, so no host is.
            elsewhere = await api.post("/v1/apps/kept/volumes",
                                       json={"name": "far", "region": "ams",
                                             "source_volume_id": source})
            assert elsewhere.status_code == 412, elsewhere.text
