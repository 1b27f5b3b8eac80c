"""Volume snapshots on a real worker: a copy taken with the volume's machine frozen.

The machine writes one counter to 40 files in turn, over and over: at any one
instant the files differ by at most one. A copy taken while it runs sees them
far apart (47 MB of other files are copied among them); a snapshot
sees them within one, because the machine is frozen for the copy, and then
runs on, the same process. The snapshot is listed, and a new volume created
from it holds the same data (the same digest).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from bodega.model.errors import BadRequest, NotFound
from bodega.worker.host.volume_copy import tree_digest
from tests.python_kit import machine_python

from .crash_kit import crash_worker, machine_config, program_pids, until

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/sys/fs/cgroup/freezer").is_dir(),
    reason="a consistent snapshot of a running machine needs root and the cgroup freezer")

FILES = 40
# Filler files sit among the counters (a directory's order is its hash order), so copying
# from the first counter to the last takes a while; each counter is replaced whole.
WRITER = (
    "import os, sys\nos.makedirs('/data/c', exist_ok=True)\n"
    f"for n in range({FILES}):\n"
    "    with open(f'/data/c/{n:02}.fill', 'wb') as f:\n        f.write(os.urandom(1200 << 10))\n"
    "i = 0\nwhile True:\n    i += 1\n"
    f"    for n in range({FILES}):\n"
    "        with open('/data/c/.tmp', 'w') as f:\n            f.write(str(i))\n"
    "        os.replace('/data/c/.tmp', f'/data/c/{n:02}')\n"
)


def counters(root: Path) -> list[int]:
    return [int((root / "c" / f"{n:02}").read_text()) for n in range(FILES)]


async def test_a_snapshot_is_consistent_listed_and_restored(tmp_path: Path) -> None:
    marker = f"bodega-snapshot-{uuid.uuid4().hex[:12]}"
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        data = worker.tmp / worker.name
        volume = await client.create_volume({"app": "a", "name": "data", "size_gb": 1,
                                             "snapshot_retention": 7})
        config = machine_config(marker, mounts=[{"volume": volume.id, "path": "/data"}])
        config["init"] = {"exec": [machine_python(), "-c", WRITER, marker]}
        machine = await client.create_machine({"app": "a", "config": config})
        await client.wait(machine.id, "started", timeout=30)
        live = data / "volumes" / volume.id
        await until(lambda: (live / "c" / f"{FILES - 1:02}").exists()
                    and min(counters(live)) > 3)
        (pid,) = program_pids(marker)

        snapshot = await client.request("POST", f"/v1/volumes/{volume.id}/snapshots",
                                        params={"app": "a"})
        assert snapshot["status"] == "created"
        assert snapshot["retention_days"] == 7
        assert snapshot["volume_size"] == 1
        assert snapshot["size"] > FILES * 1200 << 10
        copy = data / "snapshots" / snapshot["id"]
        values = counters(copy)
        assert max(values) - min(values) <= 1, f"a torn copy: {sorted(set(values))}"
        assert tree_digest(copy)[1] == snapshot["digest"]
        # Thawed after: the same process goes on counting.
        seen = max(values)
        await until(lambda: min(counters(live)) > seen + 3)
        assert program_pids(marker) == [pid]

        listed = await client.request("GET", f"/v1/volumes/{volume.id}/snapshots",
                                      params={"app": "a"})
        assert [s["id"] for s in listed] == [snapshot["id"]]
        with pytest.raises(NotFound):
            await client.request("GET", f"/v1/volumes/{volume.id}/snapshots",
                                 params={"app": "other"})

        restored = await client.create_volume({"app": "a", "name": "restored", "size_gb": 1,
                                               "snapshot_id": snapshot["id"]})
        assert restored.state == "created"
        assert tree_digest(data / "volumes" / restored.id) == tree_digest(copy)
        with pytest.raises(NotFound, match="snapshot not found"):
            await client.create_volume({"app": "b", "name": "stolen", "size_gb": 1,
                                        "snapshot_id": snapshot["id"]})
        # A volume with no machine is copied as it is.
        again = await client.request("POST", f"/v1/volumes/{restored.id}/snapshots",
                                     params={"app": "a"})
        assert again["digest"] == snapshot["digest"]
        log = await client.request("GET", "/v1/log", params={"resource": volume.id})
        assert [e["payload"]["snapshot_id"] for e in log
                if e["step"] == "snapshot_volume"] == [snapshot["id"]]


async def test_a_restore_needs_room_for_the_snapshot(tmp_path: Path) -> None:
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        volume = await client.create_volume({"app": "a", "name": "big", "size_gb": 2})
        snapshot = await client.request("POST", f"/v1/volumes/{volume.id}/snapshots",
                                        params={"app": "a"})
        with pytest.raises(BadRequest, match="size_gb must be at least"):
            await client.create_volume({"app": "a", "name": "small", "size_gb": 1,
                                        "snapshot_id": snapshot["id"]})
