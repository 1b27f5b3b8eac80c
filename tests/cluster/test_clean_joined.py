"""`bodega clean` on a joined host whose `bodega join` was killed with SIGKILL.

Hosts as network namespaces (``multihost_kit``): host 1 runs ``bodega up --advertise
--private-network``, host 2 the join line it printed, one worker, and a machine runs
there. While the join runs, `bodega clean --data-dir D` on host 2 is refused in one
line. Then the join and its components (its worker, the host's registry agent) are
killed with SIGKILL, as a power cut or an OOM kill would, and nothing stops
anything: the worker's bridge, veths and machine namespaces, the private network's
fence tables, WireGuard interface (and its wireguard-go), routing rule, the
machine's process, and the join's port claims stay. `bodega clean --data-dir D`,
typed on host 2, removes all of it, and nothing of host 1, which carries the same
cluster id on the same kernel and runs on.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bodega.networking.core.rules import table_name
from bodega.networking.core.sixpn import host_field
from bodega.networking.overlay import interface_name
from bodega.runtime.pid_lock import flock_holder
from bodega.worker.host.core.names import HostNames
from tests.cluster.deploy_kit import readable_dir
from tests.cluster.multihost_kit import MultiHost, three_hosts, until, wait_for
from tests.python_kit import machine_python

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(not (shutil.which("wg") and shutil.which("wireguard-go")),
                       reason="needs wg and wireguard-go (make test installs them)"),
]

CLAIMS = Path("/run/bodega/ports")
SLEEP = "import time; time.sleep(900)"
MARKER = f"joined-{uuid.uuid4().hex[:8]}"  # on the machine's command line


@pytest.fixture(scope="module")
def cluster() -> Iterator[MultiHost]:
    with readable_dir() as root, three_hosts(root, "--private-network") as multi:
        try:
            yield multi
        finally:  # a failed test's machine: its namespace is host 2's mounts' alone to see
            for pid in processes(MARKER):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def on_host(multi: MultiHost, *argv: str) -> str:
    """What ``argv`` prints run on host 2 (its network namespace)."""
    return subprocess.run(multi.hosts.exec(2, *argv), capture_output=True, text=True,
                          timeout=30, check=True).stdout


def processes(*wanted: str) -> list[int]:
    """Live processes whose command line holds every one of ``wanted``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [a.decode() for a in (entry / "cmdline").read_bytes().split(b"\0")]
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError, UnicodeDecodeError):
            continue
        if state != "Z" and all(w in argv for w in wanted):
            found.append(int(entry.name))
    return found


def claims_of(pid: int) -> list[Path]:
    return [p for p in sorted(CLAIMS.glob("*.lock")) if flock_holder(p) == pid]


def test_clean_removes_what_a_joined_host_killed_with_sigkill_left(cluster: MultiHost) -> None:
    data = cluster.root / "host2"
    cluster.hosts.keep_mounts(2)  # its machines' namespaces seen by the clean, as on a host
    syd = cluster.start(2, *cluster.join_argv("syd"), "--cpus", "2", "--memory-mb", "1024",
                        "--driver", "process", data=data)
    assert "Private network: on, cluster" in wait_for(syd, "bodega joined")
    cid = json.loads((data / "joined.json").read_text())["cluster_id"]
    def listed() -> dict[str, dict[str, Any]] | None:
        found = {w["region"]: w for w in cluster.json("cluster", "workers")}
        return found if {"ams", "syd"} <= set(found) else None

    workers = until(listed, "both hosts' workers listed")
    names = HostNames(cid)
    subnet, home = (ipaddress.IPv4Network(workers[r]["subnet"]) for r in ("syd", "ams"))
    host = host_field(subnet)
    wg, fence = interface_name(cid, host), table_name(cid, host)
    cluster.ok("apps", "create", "kept")
    made = cluster.bodega("machine", "run", "-a", "kept", "--region", "syd", "--json", "--",
                          machine_python(), "-c", SLEEP, MARKER)
    assert made.returncode == 0, made.stdout + made.stderr
    machine = json.loads(made.stdout)["id"]
    until(lambda: {m["id"]: m["state"] for m in cluster.json("machine", "list", "--app",
                                                             "kept")}.get(machine) == "started",
          "the machine started on host 2")
    until(lambda: processes(MARKER), "the machine's program running")
    assert syd.process is not None
    up = cluster.members[0].process
    assert up is not None
    mine, theirs = claims_of(syd.process.pid), claims_of(up.pid)
    assert mine  # the join's gossip ports
    assert theirs  # host 1's own

    refused = cluster.run_on(2, "clean", "--data-dir", str(data))
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"Error: the cluster in {data} is running: bodega join is running on it (pid "
        f"{syd.process.pid}); stop it first (it cleans up after itself when it stops)"]

    # SIGKILL to the join and its components at once: nobody stops anything (an agent
    # left alone would stop on its own once its parent is gone).
    components = {c["role"]: int(c["pid"]) for c in syd.components() if c.get("pid")}
    assert set(components) == {"agent", "worker", "broker", "proxy"}, components
    pids = [syd.process.pid, *components.values()]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    syd.process.wait()
    until(lambda: not set(pids) & set(processes()), "the join and its components gone")

    def left() -> dict[str, list[str]]:
        links = [line.split(":")[1].strip().split("@")[0]
                 for line in on_host(cluster, "ip", "-o", "link", "show").splitlines()]
        found = {
            "namespaces": [n for n in os.listdir("/run/netns")
                           if n.startswith(names.namespace_prefix(subnet))],
            "links": [n for n in links if n == names.bridge(subnet) or n == wg
                      or n.startswith(names.veth_prefix(subnet))],
            "nft tables": [t for t in on_host(cluster, "nft", "list", "tables").splitlines()
                           if fence in t],
            "rules": [r for r in on_host(cluster, "ip", "-6", "rule", "show").splitlines()
                      if r.startswith("20000:")],
            "cgroups": [str(p) for p in Path("/sys/fs/cgroup").glob(
                f"*/bodega/{names.cgroup_scope(workers['syd']['name'])}")],
            "processes": [str(p) for p in processes(MARKER) + processes("wireguard-go", wg)],
            "port claims": [str(p) for p in mine if p.exists()],
        }
        return {kind: objects for kind, objects in found.items() if objects}

    before = left()
    # Not the port claims: their locks died with the join, and any bodega on the host that
    # claims a port meanwhile may sweep them; the clean must remove whatever is left.
    assert {"namespaces", "links", "nft tables", "rules", "processes"} <= set(before), before
    assert len(before["nft tables"]) == 2  # inet and bridge
    assert wg in before["links"]
    home_namespaces = [n for n in os.listdir("/run/netns")
                       if n.startswith(names.namespace_prefix(home))]
    assert home_namespaces  # host 1's worker: the same cluster id, on the same kernel

    done = cluster.run_on(2, "clean", "--data-dir", str(data))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("removed ")
    assert done.stdout.splitlines()[-1].endswith(f"leftovers of cluster {cid}")
    assert left() == {}
    # Host 1 runs on, untouched: its namespaces, its claims, its members.
    assert up.poll() is None
    assert set(home_namespaces) <= set(os.listdir("/run/netns"))
    assert claims_of(up.pid) == theirs
    assert cluster.alive()[workers["ams"]["name"]] == "alive"

    again = cluster.run_on(2, "clean", "--data-dir", str(data), "--dry-run")
    assert again.returncode == 0, again.stderr
    assert not [line for line in again.stdout.splitlines()
                if line.startswith("would") and cid in line], again.stdout
