"""A volume outlives its host (docs/volumes.md), on hosts joined with the CLI.

Host 1 runs ``bodega up`` (region ams); hosts 2 and 3 join for region syd, each a
network namespace with its own data dir. A machine writes a volume in syd; a
snapshot taken through the CLI is sent to the other syd host. That volume's host
is then lost (every bodega process on it killed with SIGKILL): a volume created
from the snapshot lands on the host that is left with the same data, and a fork of
it goes to host 1 in ams, across the network, with the same data again. A volume
with scheduled snapshots (every few seconds here: ``--worker-arg`` of the joins) gets
them, each held off its host.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cluster.deploy_kit import readable_dir
from tests.cluster.multihost_kit import TOKEN, MultiHost, three_hosts, until, wait_for
from tests.cluster.volume_kit import blob_digest, host_of, lose, volume_dir
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

APP = "kept"
EVERY = 3.0  # seconds between scheduled snapshots on the joined hosts
BLOB = 20_000_000  # bytes the machine writes
WRITE = f"""
import hashlib, os, sys, time
root = sys.argv[1]
data = os.urandom({BLOB})
with open(os.path.join(root, "blob"), "wb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
with open(os.path.join(root, "blob.sha256"), "w") as f:
    f.write(hashlib.sha256(data).hexdigest())
time.sleep(3600)
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[MultiHost]:
    with readable_dir() as root, three_hosts(root) as multi:
        joined = [multi.start(i, *multi.join_argv("syd"), "--cpus", "2", "--memory-mb",
                              "1024", "--driver", "process", "--no-broker", "--no-proxy",
                              # Scheduled snapshots every few seconds, not every day.
                              f"--worker-arg=--snapshot-every={EVERY:g}",
                              "--worker-arg=--snapshot-upkeep=0.5")
                  for i in (2, 3)]
        for host in joined:
            wait_for(host, "bodega joined")
        until(lambda: len([w for w in multi.json("cluster", "workers")
                           if w["region"] == "syd"]) == 2, "two syd workers")
        yield multi


def create(cluster: MultiHost, body: dict[str, Any]) -> dict[str, Any] | None:
    with httpx.Client(base_url=cluster.api, timeout=120,
                      headers={"authorization": f"Bearer {TOKEN}"}) as api:
        made = api.post(f"/v1/apps/{APP}/volumes", json=body)
    if made.status_code == 200:
        return dict(made.json())
    assert made.status_code in (503, 412), made.text  # the lost host not yet seen as gone
    print(f"volume {body['name']!r} refused for now ({made.status_code}): {made.text}")
    return None


def test_a_volume_is_restored_on_another_host_after_its_host_is_lost(
        cluster: MultiHost) -> None:
    cluster.ok("apps", "create", APP)
    volume = cluster.json("volumes", "create", "data", "--app", APP, "--region", "syd",
                          "--no-scheduled-snapshots")
    mount = cluster.root / "mnt"
    with httpx.Client(base_url=cluster.api, timeout=120,
                      headers={"authorization": f"Bearer {TOKEN}"}) as api:
        made = api.post(f"/v1/apps/{APP}/machines", json={"region": "syd", "config": {
            "image": "local/test", "init": {"exec": [machine_python(), "-c", WRITE,
                                                     str(mount)]},
            "mounts": [{"volume": volume["id"], "path": str(mount)}]}})
        assert made.status_code == 200, made.text
        worker = volume["zone"]
        origin = host_of(cluster, worker)
        written = until(lambda: (volume_dir(origin, volume["id"]) / "blob.sha256").is_file()
                        and (volume_dir(origin, volume["id"]) / "blob.sha256").read_text(),
                        "the machine's data written")
        # The process driver on these hosts has no cgroup freezer: a stopped machine's
        # volume is still (a started one is frozen for the copy where the driver can).
        machine = made.json()["id"]
        stopped = api.post(f"/v1/apps/{APP}/machines/{machine}/stop")
        assert stopped.status_code == 200, stopped.text
        waited = api.get(f"/v1/apps/{APP}/machines/{machine}/wait",
                         params={"state": "stopped", "timeout": 60})
        assert waited.status_code == 200, waited.text

    started = time.monotonic()
    snapshot = cluster.json("volumes", "snapshots", "create", volume["id"], "--app", APP)
    took = time.monotonic() - started
    (other,) = [h for h in cluster.members if h.index in (2, 3) and h is not origin]
    (copy_holder,) = other.worker_pids()
    assert snapshot["holders"] == [worker, copy_holder], snapshot
    assert snapshot["off_host"] is True
    print(f"snapshot of {BLOB} bytes taken and sent to another host in {took:.2f}s")

    lose(origin)
    started = time.monotonic()
    restored = until(lambda: create(cluster, {"name": "restored", "region": "syd",
                                              "snapshot_id": snapshot["id"]}),
                     "the volume restored once its host is seen lost")
    print(f"restored {time.monotonic() - started:.2f}s after the host was lost")
    assert restored["zone"] == copy_holder
    here = volume_dir(other, restored["id"])
    assert blob_digest(here) == written
    assert (here / "blob.sha256").read_text() == written

    # A fork of the restored volume to another region: fetched by host 1 from host 3.
    forked = create(cluster, {"name": "far", "region": "ams",
                              "source_volume_id": restored["id"]})
    assert forked is not None
    assert forked["region"] == "ams"
    first = next(h for h in cluster.members if h.index == 1)
    assert blob_digest(volume_dir(first, forked["id"])) == written


def test_a_volume_gets_scheduled_snapshots_held_off_its_host(cluster: MultiHost) -> None:
    cluster.ok("apps", "create", "scheduled")
    volume = cluster.json("volumes", "create", "daily", "--app", "scheduled", "--region",
                          "syd", "--snapshot-retention", "2")

    def copied() -> list[dict[str, Any]] | None:
        found = cluster.json("volumes", "snapshots", "list", volume["id"], "--app",
                             "scheduled")
        return found if len(found) >= 2 and all(s["off_host"] for s in found) else None

    snapshots = until(copied, "two scheduled snapshots, each held off its host",
                      timeout=60)
    assert all(s["retention_days"] == 2 for s in snapshots)
    first, second = snapshots[:2]
    assert first["holders"][0] == volume["zone"]
    assert volume["zone"] not in first["holders"][1:]
    # One an interval after the other, not one per upkeep pass.
    taken = [datetime.datetime.fromisoformat(s["created_at"]) for s in (first, second)]
    assert (taken[1] - taken[0]).total_seconds() >= EVERY - 0.5
