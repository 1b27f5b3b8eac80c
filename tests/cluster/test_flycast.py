"""Flycast across hosts in namespaces: a private address per app, served by the proxy.

Two worker hosts with ``--private-network`` and ``--flycast-proxy`` and a third
host with the broker and the proxy. App ``web`` has one machine, on host 2,
stopped; ``bodega ips allocate-v6 --private`` gives it a Flycast address. A
machine of app ``client`` (the same network) on host 1 fetches
``http://web.flycast/``: the name resolves to the Flycast address, host 1
relays to the proxy, the proxy starts web's machine and forwards. A machine of
another network reaches neither the name nor the address.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bodega.networking.core.sixpn import Layout, cluster_prefix, network_field, network_key
from bodega.worker.host.network import run
from tests.integration.daemon_kit import Daemon

from .fleet_kit import serving, until
from .netns_kit import hosts
from .private_net_kit import TOKEN, PrivateHosts, api, machine_config, new_cluster_id

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(not (shutil.which("wg") and shutil.which("wireguard-go")),
                       reason="needs wg and wireguard-go (make test installs them)"),
]


async def started(client: httpx.AsyncClient, app: str, region: str, served: bool = False
                  ) -> tuple[str, str]:
    made = await client.post(f"/v1/apps/{app}/machines",
                             json={"region": region, "config": machine_config(served)})
    assert made.status_code == 200, made.text
    mid = str(made.json()["id"])
    waited = await client.get(f"/v1/apps/{app}/machines/{mid}/wait",
                              params={"state": "started", "timeout": 60})
    assert waited.status_code == 200, waited.text
    return mid, str(made.json()["private_ip"])


async def test_flycast_starts_a_stopped_machine_for_its_network_only(tmp_path: Path) -> None:
    async with hosts(3) as h:
        p = PrivateHosts(h, tmp_path, new_cluster_id())
        layout = Layout(cluster_prefix(p.cluster_id))
        relay = ("--flycast-proxy", f"{h.address(3)}:8080")
        daemons: list[Daemon] = []
        try:
            daemons.append(await p.worker(1, "w1", "ams", *relay).start())
            daemons.append(await p.worker(2, "w2", "syd", *relay).start())
            daemons.append(await p.broker(3).start())
            daemons.append(await p.proxy(3).start())
            # The proxy reaches host 2's machines at their IPv4 service address.
            await run(*h.exec(3, "ip", "route", "replace", p.subnet(2), "via", h.address(2)))
            async with api(daemons[2]) as client:
                await until(lambda: serving(client, 2))
                for app, network in (("web", None), ("client", None), ("other", "blue")):
                    made = await client.post("/v1/apps", json={
                        "app_name": app, "org_slug": "personal",
                        **({"network": network} if network else {})})
                    assert made.status_code in (200, 201), made.text
                web, _ = await started(client, "web", "syd", served=True)
                _, client_ip = await started(client, "client", "ams")
                _, other_ip = await started(client, "other", "ams")
                stopped = await client.post(f"/v1/apps/web/machines/{web}/stop")
                assert stopped.status_code == 200, stopped.text
                await client.get(f"/v1/apps/web/machines/{web}/wait",
                                 params={"state": "stopped", "timeout": 60})

                allocated = subprocess.run(
                    [sys.executable, "-m", "bodega", "ips", "allocate-v6", "--private",
                     "-a", "web", "--api-url", daemons[2].url, "--token", TOKEN],
                    capture_output=True, text=True, timeout=60, check=False)
                assert allocated.returncode == 0, allocated.stderr
                flycast = str(layout.flycast(network_field(network_key("personal", None)),
                                             "web"))
                assert flycast in allocated.stdout
                assert ipaddress.IPv6Address(flycast) in layout.served()

                # From a machine of web's network, on another host than web's machine.
                await until(lambda: _resolves(p, client_ip, "web.flycast", {flycast}))
                # It starts web's stopped machine on another host: a cold start under
                # whatever load the suite puts on two cores, so the fetch may wait long.
                got = await p.fetch(1, client_ip, "http://web.flycast/", timeout=60)
                assert got.startswith(web), got  # the probe answers "<machine id> <address>"
                state = (await client.get(f"/v1/apps/web/machines/{web}")).json()["state"]
                assert state == "started"

                # Another network: no name, and the address closes on it.
                assert await p.resolve(1, other_ip, "web.flycast") == set()
                got = await p.fetch(1, other_ip, f"http://[{flycast}]/")
                assert got.startswith("error"), got
        finally:
            for d in reversed(daemons):
                await d.stop()
            await p.reap()


async def _resolves(p: PrivateHosts, address: str, name: str, want: set[str]) -> bool:
    return await p.resolve(1, address, name) == want
