"""A machine on a worker membership cannot reach is listed with ``host_status:
unreachable`` (its row in the view still says ``started``: the worker's last word)."""

from __future__ import annotations

from pathlib import Path

from .broker_kit import in_process_cluster, machine


async def test_machines_and_volumes_on_an_unreachable_worker_say_so(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        c.catalog.set_status("ams-1", "alive")
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "far", "org_slug": "personal"})
            created = (await api.post("/v1/apps/far/machines", json=machine())).json()
            volume = await api.post("/v1/apps/far/volumes",
                                    json={"name": "data", "size_gb": 1, "region": "ams"})
            assert volume.status_code == 200, volume.text
            c.sync()

            async def listed() -> tuple[str, str, str]:
                (m,) = (await api.get("/v1/apps/far/machines")).json()
                (v,) = (await api.get("/v1/apps/far/volumes")).json()
                return m["state"], m["host_status"], v["host_status"]

            assert await listed() == ("started", "ok", "ok")
            for status in ("suspect", "dead", "left"):
                c.catalog.set_status("ams-1", status)
                assert await listed() == ("started", "unreachable", "unreachable"), status
            # Declared dead: the broker answers from the view, marked, without asking.
            c.catalog.set_status("ams-1", "dead")
            got = (await api.get(f"/v1/apps/far/machines/{created['id']}")).json()
            assert got["host_status"] == "unreachable"
            assert got["state"] == "started"
            assert got["incomplete_config"]["image"] == "registry.local/app:1"
            assert "config" not in got
            c.catalog.set_status("ams-1", "alive")
            assert await listed() == ("started", "ok", "ok")
            got = (await api.get(f"/v1/apps/far/machines/{created['id']}")).json()
            assert got["host_status"] == "ok"
            assert got["config"]["image"]


async def test_a_worker_membership_has_no_record_of_is_unknown_and_stays_a_member(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "far", "org_slug": "personal"})
            await api.post("/v1/apps/far/machines", json=machine())
            c.sync()
            (m,) = (await api.get("/v1/apps/far/machines")).json()
            assert (m["state"], m["host_status"]) == ("started", "unknown")

            async def member() -> dict[str, str]:
                members = (await api.get("/v1/cluster/members")).json()
                (found,) = [x for x in members if x["name"] == "ams-1"]
                return {k: found.get(k) for k in ("status", "host_status", "since")}

            row = c.catalog.get("workers", "ams-1")
            assert row is not None
            c.catalog.put("workers", "ams-1", {**row, "updated_at": "2026-01-02T03:04:05Z"})
            # Listed from its row, since it last wrote it: not dropped.
            assert await member() == {"status": "unknown", "host_status": "unknown",
                                      "since": "2026-01-02T03:04:05Z"}
            c.catalog.set_status("ams-1", "dead")
            dead = await member()
            assert (dead["status"], dead["host_status"]) == ("dead", "unreachable")
            assert dead["since"]
            c.catalog.set_status("ams-1", "alive")
            assert (await member())["host_status"] == "ok"
