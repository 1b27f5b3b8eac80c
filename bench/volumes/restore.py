"""A lost host's volume restored on another host, on hosts joined with the CLI.

Three network namespaces as hosts (``tests/cluster/multihost_kit.py``): host 1 runs
``bodega up`` (region ams), hosts 2 and 3 join for syd. A machine writes
``--mb`` MB of random data into a syd volume and is stopped; then, timed through the
public API:

- **snapshot 1**: the first snapshot: the local copy, and the tar stream to the other
  syd host, digest checked there;
- **snapshot 2**: a second one of the unchanged volume (the same bytes are sent again:
  copies are whole, not content-addressed);
- **restore after loss**: the volume's host killed (SIGKILL of every bodega process on
  it), then ``POST .../volumes`` with the snapshot id until it answers: the volume is
  made on the host holding the copy;
- **restore with a fetch**: the snapshot restored into ams: host 1's worker holds no
  copy, so it fetches it from host 3 (digest checked) and provisions from it;
- **fork across hosts**: a fork of the restored volume into ams: a snapshot on host 3,
  sent to host 1 as its copy (the only other host left), and the fork made there from
  it.

Data lost is what the machine wrote after the last snapshot (here: nothing).

    sudo python -m bench.volumes.restore [--mb 100]
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any

import httpx
from tests.cluster.deploy_kit import readable_dir
from tests.cluster.multihost_kit import TOKEN, MultiHost, three_hosts, until, wait_for
from tests.cluster.volume_kit import blob_digest, host_of, lose, volume_dir
from tests.python_kit import machine_python

APP = "bench"
WRITE = """
import hashlib, os, sys, time
root, size = sys.argv[1], int(sys.argv[2])
digest = hashlib.sha256()
with open(os.path.join(root, "blob"), "wb") as f:
    for _ in range(size):
        chunk = os.urandom(1 << 20)
        digest.update(chunk)
        f.write(chunk)
    f.flush()
    os.fsync(f.fileno())
with open(os.path.join(root, "blob.sha256"), "w") as f:
    f.write(digest.hexdigest())
time.sleep(3600)
"""


def timed(api: httpx.Client, method: str, path: str, **kw: Any) -> tuple[float, Any]:
    started = time.monotonic()
    answer = api.request(method, path, **kw)
    assert answer.status_code == 200, answer.text
    return time.monotonic() - started, answer.json()


def run(cluster: MultiHost, mb: int) -> None:
    api = httpx.Client(base_url=cluster.api, timeout=600,
                       headers={"authorization": f"Bearer {TOKEN}"})
    with contextlib.closing(api):
        api.post("/v1/apps", json={"app_name": APP, "org_slug": "personal"})
        _, volume = timed(api, "POST", f"/v1/apps/{APP}/volumes",
                          json={"name": "data", "region": "syd", "size_gb": 1})
        mount = cluster.root / "mnt"
        _, machine = timed(api, "POST", f"/v1/apps/{APP}/machines", json={
            "region": "syd", "config": {
                "image": "local/test",
                "init": {"exec": [machine_python(), "-c", WRITE, str(mount), str(mb)]},
                "mounts": [{"volume": volume["id"], "path": str(mount)}]}})
        origin = host_of(cluster, volume["zone"])
        sums = volume_dir(origin, volume["id"]) / "blob.sha256"
        written = until(lambda: sums.is_file() and sums.read_text(), "data written",
                        timeout=600)
        timed(api, "POST", f"/v1/apps/{APP}/machines/{machine['id']}/stop")
        timed(api, "GET", f"/v1/apps/{APP}/machines/{machine['id']}/wait",
              params={"state": "stopped", "timeout": 60})
        snapshots = f"/v1/apps/{APP}/volumes/{volume['id']}/snapshots"
        first, snapshot = timed(api, "POST", snapshots)
        second, again = timed(api, "POST", snapshots)
        assert snapshot["off_host"], snapshot
        assert again["off_host"], again

        lose(origin)
        lost = time.monotonic()

        def restored() -> dict[str, Any] | None:
            made = api.post(f"/v1/apps/{APP}/volumes", json={
                "name": "restored", "region": "syd", "snapshot_id": again["id"]})
            return made.json() if made.status_code == 200 else None

        copy = until(restored, "restored", timeout=300)
        restore = time.monotonic() - lost
        across, remote = timed(api, "POST", f"/v1/apps/{APP}/volumes", json={
            "name": "remote", "region": "ams", "snapshot_id": again["id"]})
        fork, far = timed(api, "POST", f"/v1/apps/{APP}/volumes", json={
            "name": "far", "region": "ams", "source_volume_id": copy["id"]})
        other = host_of(cluster, copy["zone"])
        first_host = next(h for h in cluster.members if h.index == 1)
        same = (blob_digest(volume_dir(other, copy["id"])) == written
                and blob_digest(volume_dir(first_host, remote["id"])) == written
                and blob_digest(volume_dir(first_host, far["id"])) == written)
    print(f"volume: {snapshot['size'] / 1e6:.1f} MB of data "
          f"(sent whole to {', '.join(snapshot['holders'][1:])})")
    print(f"snapshot 1 (copy + send to another host): {first:.2f} s")
    print(f"snapshot 2 (unchanged, sent whole again):  {second:.2f} s")
    print(f"restore after the host was lost:           {restore:.2f} s")
    print(f"restore on a host holding no copy (fetch): {across:.2f} s")
    print(f"fork across hosts into another region:     {fork:.2f} s")
    print(f"restored on {copy['zone']}, fetched on {remote['zone']}, forked on {far['zone']}")
    print(f"checksums equal: {same}; data lost: writes after snapshot 2 (none here)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args()
    with readable_dir() as root, three_hosts(root) as cluster:
        joined = [cluster.start(i, *cluster.join_argv("syd"), "--cpus", "2", "--memory-mb",
                                "1024", "--driver", "process", "--no-broker", "--no-proxy")
                  for i in (2, 3)]
        for host in joined:
            wait_for(host, "bodega joined")
        until(lambda: len([w for w in cluster.json("cluster", "workers")
                           if w["region"] == "syd"]) == 2, "two syd workers")
        run(cluster, args.mb)


if __name__ == "__main__":
    main()
