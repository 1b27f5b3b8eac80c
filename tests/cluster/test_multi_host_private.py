"""docs/multi-host.md with the private network, on by default: `bodega up`, then join.

Three hosts as network namespaces (``multihost_kit``): host 1 runs ``bodega up
--advertise ...`` with no network flag and prints a join line without one;
hosts 2 (syd, one worker) and 3 (lon, two workers on one kernel) run that line
and run the private network as the cluster does. Then, with the CLI a user
types, an app of probe machines, one in syd and two in lon. From inside the syd
machine (``getent`` through its own resolv.conf, as ``test_private_network.py``
does): ``probe.internal`` names all three, and a TCP connection by name reaches
each lon machine, over WireGuard (host 2's overlay counters move).
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import pytest

from bodega.networking.core.sixpn import cluster_prefix, host_field
from bodega.networking.overlay import interface_name
from tests.cluster.deploy_kit import readable_dir
from tests.cluster.multihost_kit import MultiHost, three_hosts, until, wait_for
from tests.cluster.private_net_kit import PROBE
from tests.python_kit import machine_python

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(not (shutil.which("wg") and shutil.which("wireguard-go")),
                       reason="needs wg and wireguard-go (make test installs them)"),
]

REGIONS = {2: "syd", 3: "lon"}
WORKERS = {2: 1, 3: 2}


@pytest.fixture(scope="module")
def cluster() -> Iterator[MultiHost]:
    # No flag anywhere: the private network is on by default, and joined hosts run it as
    # the cluster does.
    with readable_dir() as root, three_hosts(root) as multi:
        assert "--private-network" not in multi.join_line, multi.join_line
        joined = [multi.start(i, *multi.join_argv(REGIONS[i]), "--cpus", "4",
                              "--memory-mb", "2048", "--driver", "process",
                              "--workers", str(WORKERS[i])) for i in (2, 3)]
        for host in joined:
            out = wait_for(host, "bodega joined")
            assert "Private network: on, cluster" in out, out
        until(lambda: sum(1 for s in multi.alive().values() if s == "alive") >= 6,
              "four workers, the broker and the proxy alive")
        yield multi


def probe(cluster: MultiHost, region: str) -> dict[str, Any]:
    """``bodega machine run`` of the probe in ``region``; its row once it has its 6PN
    address."""
    made = cluster.bodega("machine", "run", "-a", "probe", "--region", region, "--json",
                          "--", machine_python(), "-c", PROBE)
    assert made.returncode == 0, made.stdout + made.stderr
    machine_id = json.loads(made.stdout)["id"]

    def addressed() -> dict[str, Any] | None:
        rows = {m["id"]: m for m in cluster.json("machine", "list", "--app", "probe")}
        row = rows.get(machine_id)
        return row if row and row["state"] == "started" and ":" in row["private_ip"] else None
    return until(addressed, f"probe in {region} started with a private address", timeout=60)


def inside(cluster: MultiHost, index: int, address: str, path: str) -> str:
    """GET ``path`` of the probe at private ``address``, from its host ``index``: what the
    machine answers is what it saw from inside."""
    done = subprocess.run(cluster.hosts.exec(index, "curl", "-s", "--max-time", "20",
                                             f"http://[{address}]:8080{path}"),
                          capture_output=True, text=True, timeout=30, check=False)
    return done.stdout.strip()


def sent_by(cluster: MultiHost, index: int, interface: str) -> int:
    """Bytes host ``index``'s overlay interface sent to all its peers (``wg show dump``)."""
    dump = subprocess.run(cluster.hosts.exec(index, "wg", "show", interface, "dump"),
                          capture_output=True, text=True, timeout=10, check=True).stdout
    return sum(int(f[6]) for line in dump.splitlines()[1:] if len(f := line.split("\t")) > 6)


def test_a_machine_reaches_another_hosts_machine_by_app_internal_over_wireguard(
        cluster: MultiHost) -> None:
    cluster.ok("apps", "create", "probe")
    with ThreadPoolExecutor(3) as pool:  # three starts at once, on two hosts
        syd, *lon = pool.map(lambda region: probe(cluster, region), ["syd", "lon", "lon"])
    ip = {m["id"]: m["private_ip"] for m in (syd, *lon)}
    cluster_id = json.loads((cluster.members[1].data / "joined.json").read_text())["cluster_id"]
    assert all(ipaddress.IPv6Address(a) in cluster_prefix(cluster_id) for a in ip.values())

    # probe.internal, resolved inside the syd machine on host 2: all three machines.
    here = syd["private_ip"]
    until(lambda: set(inside(cluster, 2, here, f"/resolve?name={quote('probe.internal')}")
                      .split()) == set(ip.values()) or None,
          "probe.internal naming every probe machine, from host 2", timeout=30)

    syd_worker = next(w for w in cluster.json("cluster", "workers") if w["region"] == "syd")
    overlay = interface_name(cluster_id, host_field(ipaddress.IPv4Network(syd_worker["subnet"])))
    before = sent_by(cluster, 2, overlay)
    # The tunnel to host 3 is up once its first handshake is done: a lost first initiation
    # is sent again only after WireGuard's 5 s rekey timeout, longer than one fetch waits.
    first = lon[0]
    first_url = f"http://{first['id']}.vm.probe.internal:8080/"
    until(lambda: inside(cluster, 2, here, f"/fetch?url={quote(first_url, safe='')}")
          == f"{first['id']} {first['private_ip']}" or None,
          "a connection by name from host 2's machine to host 3's, over the overlay",
          timeout=30)
    # A TCP connection by name to each lon machine (host 3 runs two workers on one kernel).
    for machine in lon:
        url = f"http://{machine['id']}.vm.probe.internal:8080/"
        reply = inside(cluster, 2, here, f"/fetch?url={quote(url, safe='')}")
        assert reply == f"{machine['id']} {machine['private_ip']}", reply
    assert inside(cluster, 2, here, f"/fetch?url={quote('http://lon.probe.internal:8080/')}"
                  ).split()[0] in {m["id"] for m in lon}
    assert sent_by(cluster, 2, overlay) > before  # over WireGuard, not the plain link
