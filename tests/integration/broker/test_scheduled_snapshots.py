"""Scheduled snapshots (a volume's ``auto_backup_enabled``, flyctl's
``--scheduled-snapshots``): one every interval (a worker setting, a day by default),
sent off its host like any other, and removed on every holder once its retention ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bodega.worker.store import snapshot_queries

from .broker_kit import in_process_cluster


async def test_a_volume_gets_a_snapshot_every_interval_kept_on_two_workers_until_it_expires(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        first = await c.add_worker("ams-1")
        second = await c.add_worker("ams-2")
        for worker in (first, second):
            worker.copies.schedule_every = 0.5
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "kept", "org_slug": "personal"})
            volumes = {}
            for name, scheduled in (("daily", True), ("never", False)):
                made = await api.post("/v1/apps/kept/volumes", json={
                    "name": name, "region": "ams", "auto_backup_enabled": scheduled,
                    "snapshot_retention": 1})
                assert made.status_code == 200, made.text
                volumes[name] = made.json()["id"]
            for worker in (first, second):
                await worker.copies.upkeep()
            # Not yet: its first is an interval after the volume was made.
            for volume in volumes.values():
                listed = await api.get(f"/v1/apps/kept/volumes/{volume}/snapshots")
                assert listed.json() == [], listed.text
            await asyncio.sleep(0.6)
            for worker in (first, second):
                await worker.copies.upkeep()
            never = await api.get(f"/v1/apps/kept/volumes/{volumes['never']}/snapshots")
            assert never.json() == [], never.text
            daily = await api.get(f"/v1/apps/kept/volumes/{volumes['daily']}/snapshots")
            (snapshot,) = daily.json()
            assert snapshot["off_host"] is True
            assert snapshot["retention_days"] == 1
            for worker in (first, second):  # an upkeep soon after takes no second one
                await worker.copies.upkeep()
            again = await api.get(f"/v1/apps/kept/volumes/{volumes['daily']}/snapshots")
            assert [s["id"] for s in again.json()] == [snapshot["id"]]

            # A day on, every holder removes it (its files with it).
            for worker in (first, second):
                assert worker.config.snapshot_dir(snapshot["id"]).is_dir()
                with worker.store.tx() as conn:
                    conn.execute("UPDATE snapshots SET expires_at = expires_at - 86400")
                worker.copies.schedule_every = 3600.0
                await worker.copies.upkeep()
                assert snapshot_queries.get_snapshot(worker.store.db, snapshot["id"]) is None
                assert not worker.config.snapshot_dir(snapshot["id"]).exists()
