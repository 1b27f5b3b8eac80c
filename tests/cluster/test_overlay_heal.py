"""An overlay whose wireguard-go dies is brought up again by the next peer round.

One network namespace of its own, a machine bridge in it, and an ``Overlay``
started there as a worker starts it (``start``, then ``sync`` with one wanted
peer), run by a short script through ``ip netns exec``. Its ``wireguard-go`` is
killed with SIGKILL (its interface and the routes through it go with it); one
more ``sync``, as the worker's peer-following round makes, brings the interface
back with the same public key, listen port, routes and rule, and the peer, and
says so in one warning.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bodega.networking.core.kernel_objects import table_of
from bodega.networking.core.peers import parse_dump
from bodega.networking.core.sixpn import Layout, cluster_prefix
from bodega.networking.overlay import SOCKET_DIR, interface_name
from bodega.worker.host.network import run
from tests.poll_kit import until

from .private_net_kit import new_cluster_id

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(not (shutil.which("wg") and shutil.which("wireguard-go")),
                       reason="needs wg and wireguard-go (make test installs them)"),
]

HOST = 0x0007
PORT = 51877

# argv: phase ("start": start, then sync; "round": sync alone), the spec as JSON, the peer
# as JSON. Prints how many peer changes the sync made.
SCRIPT = r"""
import asyncio, json, logging, sys
from pathlib import Path
from bodega.networking.overlay import Overlay, OverlaySpec
from bodega.networking.core.peers import Peer
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
spec = json.loads(sys.argv[2])
overlay = Overlay(OverlaySpec(**{**spec, "key_dir": Path(spec["key_dir"])}))
peer = Peer(**json.loads(sys.argv[3]))
async def main():
    if sys.argv[1] == "start":
        await overlay.start()
    print(await overlay.sync({peer.public_key: peer}))
asyncio.run(main())
"""


def in_ns(ns: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                          check=False, timeout=60)


async def test_a_dead_wireguard_go_is_brought_up_again_with_its_key_port_routes_and_peers(
        tmp_path: Path) -> None:
    cluster = new_cluster_id()
    layout = Layout(cluster_prefix(cluster))
    ns, wg, bridge = f"bdgheal-{os.getpid()}", interface_name(cluster, HOST), "bhealbr0"
    spec = {"interface": wg, "key_dir": str(tmp_path / "wireguard"), "listen_port": PORT,
            "endpoint": f"10.0.0.1:{PORT}", "block": str(layout.host_block(HOST)),
            "cluster": str(layout.prefix), "bridge": bridge, "table": table_of(HOST)}
    peer_key = (await run("wg", "pubkey", stdin=(await run("wg", "genkey")).encode())).strip()
    peer = {"public_key": peer_key, "endpoint": f"10.0.0.2:{PORT}",
            "block": str(layout.host_block(HOST + 1)), "name": "w2"}

    def phase(name: str) -> subprocess.CompletedProcess[str]:
        return in_ns(ns, sys.executable, "-c", SCRIPT, name, json.dumps(spec), json.dumps(peer))

    await run("ip", "netns", "add", ns)
    try:
        await run("ip", "-n", ns, "link", "add", bridge, "type", "bridge")
        await run("ip", "-n", ns, "link", "set", bridge, "up")
        started = phase("start")
        assert started.returncode == 0, started.stderr
        assert started.stdout.split() == ["1"]
        before = in_ns(ns, "wg", "show", wg, "dump").stdout.splitlines()[0].split("\t")

        pids = (await run("ip", "netns", "pids", ns)).split()
        assert len(pids) == 1
        assert Path(f"/proc/{pids[0]}/comm").read_text().strip() == "wireguard-go"
        os.kill(int(pids[0]), signal.SIGKILL)
        await until(lambda: in_ns(ns, "ip", "link", "show", wg).returncode != 0,
                    what="the interface gone with its wireguard-go")

        healed = phase("round")
        assert healed.returncode == 0, healed.stderr
        assert healed.stdout.split() == ["1"]  # the peer set again on the new interface
        assert f"overlay {wg} was gone" in healed.stderr
        assert "Traceback" not in healed.stderr
        dump = in_ns(ns, "wg", "show", wg, "dump").stdout
        after = dump.splitlines()[0].split("\t")
        assert after[1:3] == before[1:3] == [after[1], str(PORT)]  # public key, listen port
        assert set(parse_dump(dump)) == {peer_key}
        assert f"{layout.prefix} dev {wg}" in in_ns(ns, "ip", "-6", "route", "show").stdout
        table = in_ns(ns, "ip", "-6", "route", "show", "table", str(table_of(HOST))).stdout
        assert f"{layout.prefix} dev {wg}" in table
        assert f"{spec['block']} dev {bridge}" in table
        rules = in_ns(ns, "ip", "-6", "rule", "show").stdout
        assert rules.count(f"from {spec['block']} lookup") == 1
    finally:
        await run("ip", "-n", ns, "link", "del", wg, check=False)  # its wireguard-go exits
        for pid in (await run("ip", "netns", "pids", ns, check=False)).split():
            os.kill(int(pid), signal.SIGKILL)
        await run("ip", "netns", "del", ns, check=False)
        (SOCKET_DIR / f"{wg}.sock").unlink(missing_ok=True)
