"""A machine made through one broker, asked of another before gossip brings its row."""

from __future__ import annotations

from pathlib import Path

from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.ids import MARK_DIGITS, worker_mark

from .broker_kit import in_process_cluster, machine


async def test_a_machine_made_through_another_broker_is_found_before_its_row_arrives(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        for name in ("ams-1", "ams-2", "ams-3"):
            await c.add_worker(name)
        await c.add_broker()
        async with c.api(0) as first:
            await first.post("/v1/apps", json={"app_name": "far", "org_slug": "personal"})
            # The second broker's view has the workers and the app, and never hears of
            # a machine: as if gossip had not reached it yet.
            lagging = MemoryCatalog()
            for table in ("workers", "apps"):
                for doc in c.catalog.rows(table):
                    lagging.put(table, str(doc.get("name") or doc.get("app_name")), doc)
            await c.add_broker(catalog=lagging, name="broker-lagging")
            async with c.api(1) as second:
                for _ in range(3):
                    made = (await first.post("/v1/apps/far/machines", json=machine())).json()
                    mid = made["id"]
                    assert mid[:MARK_DIGITS] in {worker_mark(w.config.name) for w in c.workers}
                    assert lagging.get("machines", mid) is None
                    got = await second.get(f"/v1/apps/far/machines/{mid}")
                    assert got.status_code == 200, got.text
                    assert got.json()["id"] == mid
                    waited = await second.get(f"/v1/apps/far/machines/{mid}/wait",
                                              params={"state": "started", "timeout": 30})
                    assert waited.status_code == 200, waited.text
                    stopped = await second.post(f"/v1/apps/far/machines/{mid}/stop")
                    assert stopped.status_code == 200, stopped.text
                # An id no worker made is still a 404, in the error shape.
                missing = await second.get("/v1/apps/far/machines/0123456789abcd")
                assert missing.status_code == 404
                assert set(missing.json()) >= {"error"}
