"""A snapshot outlives its volume's host: it is sent to another worker when taken, and a
volume is restored from that copy once the origin is gone. Where the only holder cannot
be reached, the create says so (503), as a fork of a volume on that host does: the
snapshot exists, so "not found" would be wrong."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from bodega.worker.daemon import Worker
from bodega.worker.host.volume_copy import tree_digest
from bodega.worker.store import volume_queries

from .broker_kit import Cluster, in_process_cluster


def holder_of(c: Cluster, volume_id: str) -> Worker:
    (found,) = [w for w in c.workers if any(
        v.id == volume_id for v in volume_queries.list_volumes(w.store.db, None, True))]
    return found


def write_data(worker: Worker, volume_id: str) -> str:
    """Some files in the volume (a nested one, a link, a private mode); their digest."""
    root = worker.config.volume_dir(volume_id)
    (root / "db").mkdir()
    (root / "db" / "pages").write_bytes(os.urandom(300_000))
    (root / "db" / "pages").chmod(0o600)
    os.symlink("db/pages", root / "current")
    return tree_digest(root)[1]


async def test_a_snapshot_is_restored_from_its_copy_after_its_host_is_lost(
        tmp_path: Path) -> None:
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
            origin = holder_of(c, volume)
            (other,) = [w for w in c.workers if w is not origin]
            digest = write_data(origin, volume)
            taken = await api.post(f"/v1/apps/kept/volumes/{volume}/snapshots")
            assert taken.status_code == 200, taken.text
            snapshot = taken.json()
            assert snapshot["holders"] == [origin.config.name, other.config.name]
            assert snapshot["off_host"] is True
            assert snapshot["digest"] == digest
            kept = other.config.snapshot_dir(snapshot["id"])
            assert tree_digest(kept)[1] == digest  # whole, on the other worker's disk
            c.sync()

            c.workers.remove(origin)
            await origin.stop()  # its rows stay in the view: a host lost, not gone
            # Its volume's host lost, its snapshots are listed from the copies kept elsewhere.
            listed = await api.get(f"/v1/apps/kept/volumes/{volume}/snapshots")
            assert listed.status_code == 200, listed.text
            assert [s["id"] for s in listed.json()] == [snapshot["id"]]
            restored = await api.post("/v1/apps/kept/volumes",
                                      json={"name": "copy", "region": "ams",
                                            "snapshot_id": snapshot["id"]})
            assert restored.status_code == 200, restored.text
            assert restored.json()["zone"] == other.config.name
            data = other.config.volume_dir(restored.json()["id"])
            assert tree_digest(data)[1] == digest
            assert (data / "current").is_symlink()
            assert (data / "db" / "pages").stat().st_mode & 0o777 == 0o600
            # A fork needs a snapshot taken now, at the source: its host is needed.
            forked = await api.post("/v1/apps/kept/volumes",
                                    json={"name": "fork", "region": "ams",
                                          "source_volume_id": volume})
            assert forked.status_code == 503, forked.text


async def test_a_copy_that_could_not_be_sent_is_sent_by_the_upkeep(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        first = await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "kept", "org_slug": "personal"})
            made = await api.post("/v1/apps/kept/volumes",
                                  json={"name": "data", "size_gb": 1, "region": "ams"})
            volume = made.json()["id"]
            digest = write_data(first, volume)
            taken = await api.post(f"/v1/apps/kept/volumes/{volume}/snapshots")
            assert taken.status_code == 200, taken.text
            # No other worker yet: the snapshot is local-only, and says so.
            assert taken.json()["holders"] == ["ams-1"]
            assert taken.json()["off_host"] is False
            second = await c.add_worker("ams-2")
            await first.copies.upkeep()
            listed = await api.get(f"/v1/apps/kept/volumes/{volume}/snapshots")
            (snapshot,) = listed.json()
            assert snapshot["holders"] == ["ams-1", "ams-2"]
            assert snapshot["off_host"] is True
            assert tree_digest(second.config.snapshot_dir(snapshot["id"]))[1] == digest


async def test_restoring_a_snapshot_kept_only_on_an_unreachable_host_is_a_503(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        for name in ("ams-1", "ams-2"):
            worker = await c.add_worker(name)
            worker.copies.copies = 0  # as --snapshot-copies 0: snapshots stay on their host
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "kept", "org_slug": "personal"})
            made = await api.post("/v1/apps/kept/volumes",
                                  json={"name": "data", "size_gb": 1, "region": "ams"})
            assert made.status_code == 200, made.text
            volume = made.json()["id"]
            taken = await api.post(f"/v1/apps/kept/volumes/{volume}/snapshots")
            assert taken.status_code == 200, taken.text
            assert taken.json()["off_host"] is False
            snapshot = taken.json()["id"]
            c.sync()
            # With every host answering, a snapshot none keeps is not found.
            missing = await api.post("/v1/apps/kept/volumes",
                                     json={"name": "copy", "region": "ams",
                                           "snapshot_id": "vs_nosuchsnapshot"})
            assert missing.status_code == 404, missing.text
            holder = holder_of(c, volume)
            c.workers.remove(holder)
            await holder.stop()

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


async def test_a_copy_longer_than_the_answer_goes_on_after_it(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_worker("ams-2")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "kept", "org_slug": "personal"})
            made = await api.post("/v1/apps/kept/volumes",
                                  json={"name": "data", "size_gb": 1, "region": "ams"})
            volume = made.json()["id"]
            origin = holder_of(c, volume)
            write_data(origin, volume)
            origin.copies.answer_within = 0.0  # as a copy of a big volume: not waited for
            taken = await api.post(f"/v1/apps/kept/volumes/{volume}/snapshots")
            assert taken.status_code == 200, taken.text
            assert taken.json()["off_host"] is False

            async def copied() -> bool:
                listed = await api.get(f"/v1/apps/kept/volumes/{volume}/snapshots")
                return bool(listed.json()[0]["off_host"])

            for _ in range(100):
                if await copied():
                    break
                await asyncio.sleep(0.05)
            assert await copied()


async def test_a_transfer_cut_short_leaves_nothing_after_a_restart(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        worker = await c.add_worker("ams-1")
        left = [worker.config.snapshots_dir / ".transfers" / "tmp1" / "snapshot.tar",
                worker.config.snapshots_dir / "vs_cutshort.partial" / "file"]
        for path in left:
            path.parent.mkdir(parents=True)
            path.write_bytes(b"half")
        kept = worker.config.snapshots_dir / "vs_whole" / "file"
        kept.parent.mkdir(parents=True)
        kept.write_bytes(b"whole")
        worker.copies.recover()
        assert not any(path.parent.exists() for path in left)
        assert kept.exists()


async def test_a_restore_goes_to_a_worker_holding_a_copy_while_it_has_room(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        origin = await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "kept", "org_slug": "personal"})
            made = await api.post("/v1/apps/kept/volumes",
                                  json={"name": "data", "size_gb": 1, "region": "ams"})
            volume = made.json()["id"]
            await c.add_worker("ams-2", disk_gb=50)  # the copy's holder
            await c.add_worker("ams-3", disk_gb=20)  # one ordinary placement prefers
            taken = await api.post(f"/v1/apps/kept/volumes/{volume}/snapshots")
            assert taken.json()["holders"] == ["ams-1", "ams-2"], taken.text
            c.sync()
            c.workers.remove(origin)
            await origin.stop()
            zones = []
            for index, size in enumerate((1, 1, 1, 60, 45, 4)):
                restored = await api.post("/v1/apps/kept/volumes", json={
                    "name": f"copy{index}", "region": "ams", "snapshot_id": taken.json()["id"],
                    "size_gb": size})
                zones.append(restored.json().get("zone") if restored.status_code == 200
                             else restored.status_code)
                c.sync()
            # The holder while it has room (ordinary placement would prefer ams-3); one
            # too big for any worker nowhere (412); once the holder is full, the other,
            # which fetches the snapshot.
            assert zones == ["ams-2", "ams-2", "ams-2", 412, "ams-2", "ams-3"]
