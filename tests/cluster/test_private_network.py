"""The private network across hosts in namespaces: addresses, names, isolation, the overlay.

Three worker hosts (two at first, a third joining later) and a broker host, each
a network namespace; the workers run with ``--private-network``. Apps ``web``
(the organization's network) and ``other`` (network ``blue``) each get a
machine on host 1 (ams) and host 2 (syd). From inside the machines:

- ``web.internal`` resolves (``getent``, through the machine's resolv.conf) to
  both web machines, and a TCP connection by name reaches the one on the other
  host, over WireGuard (the peers' transfer counters move);
- ``other``'s machine gets nothing from web's, by address or by name, on the
  same host or across, and no machine reaches its host's worker API;
- a machine that stops drops out of the name on both hosts; one that starts
  appears; one started again has the address it had;
- a host killed drops out of every peer list, and is peered again when it comes
  back; a host that joins is peered and reached without a restart of the others.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bodega.networking.core.rules import table_name
from bodega.networking.core.sixpn import cluster_prefix, host_field
from bodega.networking.overlay import interface_name
from bodega.worker.host.network import run
from tests.integration.daemon_kit import Daemon

from .fleet_kit import serving, until
from .netns_kit import hosts
from .private_net_kit import (
    TOKEN,
    PrivateHosts,
    api,
    machine_config,
    new_cluster_id,
    public_key,
)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(not (shutil.which("wg") and shutil.which("wireguard-go")),
                       reason="needs wg and wireguard-go (make test installs them)"),
]


async def create(client: httpx.AsyncClient, app: str, region: str) -> dict[str, str]:
    response = await client.post(f"/v1/apps/{app}/machines",
                                 json={"region": region, "config": machine_config()})
    assert response.status_code == 200, response.text
    machine = response.json()
    waited = await client.get(f"/v1/apps/{app}/machines/{machine['id']}/wait",
                              params={"state": "started", "timeout": 60})
    assert waited.status_code == 200, waited.text
    return dict(machine)


async def private_ip(client: httpx.AsyncClient, app: str, machine_id: str) -> str:
    """The machine's private address as the API shows it, once its row carries one."""
    async def found() -> str | None:
        doc = (await client.get(f"/v1/apps/{app}/machines/{machine_id}")).json()
        ip = str(doc.get("private_ip", ""))
        return ip if ":" in ip else None
    return str(await until(found, timeout=30))


async def test_private_network_across_hosts(tmp_path: Path) -> None:
    async with hosts(4) as h:
        p = PrivateHosts(h, tmp_path, new_cluster_id())
        prefix = cluster_prefix(p.cluster_id)
        wg = {i: interface_name(p.cluster_id, host_field(ipaddress.IPv4Network(p.subnet(i))))
              for i in (1, 2, 3)}
        daemons: list[Daemon] = []
        try:
            w1 = await p.worker(1, "w1", "ams").start()
            w2 = await p.worker(2, "w2", "syd").start()
            broker = await p.broker(4).start()
            daemons += [w1, w2, broker]
            async with api(broker) as client:
                await until(lambda: serving(client, 2))
                assert (await client.post("/v1/apps", json={
                    "app_name": "web", "org_slug": "personal"})).status_code in (200, 201)
                made = _cli(broker, "apps", "create", "other", "--network", "blue")
                assert (made.returncode, made.stdout.strip()) == (0, "New app created: other")
                refused = _cli(broker, "apps", "create", "third", "--network", "Blue Net")
                assert refused.returncode == 1
                assert refused.stderr.strip().splitlines() == [
                    "Error: invalid_argument: network 'Blue Net': use lowercase letters, "
                    "digits and -, as for an app name"]
                assert (await client.get("/v1/apps/other")).json()["network"] == "blue"
                web1 = await create(client, "web", "ams")
                web2 = await create(client, "web", "syd")
                other1 = await create(client, "other", "ams")
                other2 = await create(client, "other", "syd")
                ip = {m["id"]: await private_ip(client, app, m["id"])
                      for app, m in (("web", web1), ("web", web2), ("other", other1),
                                     ("other", other2))}
                assert all(ipaddress.IPv6Address(a) in prefix for a in ip.values())

                # Each machine knows its own private address, in FLY_PRIVATE_IP. (Asked
                # until it answers: started is recorded before the program binds its port.)
                async def hello() -> bool:
                    return await p.ask(1, ip[web1["id"]], "/") == \
                        f"{web1['id']} {ip[web1['id']]}"
                await until(hello)

                # web.internal, from inside web's machine on host 1: both hosts' machines.
                both = {ip[web1["id"]], ip[web2["id"]]}
                await until(lambda: _resolves(p, 1, ip[web1["id"]], "web.internal", both))
                assert await p.resolve(1, ip[web1["id"]], "syd.web.internal") == \
                    {ip[web2["id"]]}
                assert await p.resolve(1, ip[web1["id"]],
                                       f"{web2['id']}.vm.web.internal") == {ip[web2["id"]]}
                # ... and a TCP connection by name to host 2's, over WireGuard.
                # (Until it answers: started is recorded before the program binds its port.)
                before = await p.wg_dump(1, wg[1])
                await until(lambda: _fetches(p, 1, ip[web1["id"]], "http://syd.web.internal:8080/",
                                             f"{web2['id']} {ip[web2['id']]}"))
                assert _sent(await p.wg_dump(1, wg[1])) > _sent(before)

                # Another network sees nothing of web, by name or by address, here or there.
                assert await p.resolve(1, ip[other1["id"]], "web.internal") == set()
                await until(lambda: _resolves(p, 1, ip[other1["id"]], "other.internal",
                                              {ip[other1["id"]], ip[other2["id"]]}))
                for target in (web1, web2):
                    got = await p.fetch(1, ip[other1["id"]], f"http://[{ip[target['id']]}]:8080/")
                    assert got.startswith("error"), got
                got = await p.fetch(2, ip[other2["id"]], f"http://[{ip[web1['id']]}]:8080/")
                assert got.startswith("error"), got
                # Same network, other host, by address: through (once its program listens).
                await until(lambda: _fetches(p, 1, ip[other1["id"]],
                                             f"http://[{ip[other2['id']]}]:8080/",
                                             f"{other2['id']} {ip[other2['id']]}"))
                # No machine reaches its host's worker API (nor gossip, nor anything else of
                # the host's): the fence drops it, and counts it.
                dropped = await _host_drops(p, 1)
                assert await p.connect(1, ip[web1["id"]], h.address(1), 7000) == \
                    "error: TimeoutError"
                assert await _host_drops(p, 1) > dropped

                # A machine that stops drops out of the name on both hosts; a new one appears.
                assert (await client.post(f"/v1/apps/web/machines/{web2['id']}/stop")
                        ).status_code == 200
                await until(lambda: _resolves(p, 1, ip[web1["id"]], "web.internal",
                                              {ip[web1["id"]]}), timeout=10)
                web3 = await create(client, "web", "syd")
                ip[web3["id"]] = await private_ip(client, "web", web3["id"])
                await until(lambda: _resolves(p, 1, ip[web1["id"]], "web.internal",
                                              {ip[web1["id"]], ip[web3["id"]]}), timeout=10)
                await until(lambda: _resolves(p, 2, ip[web3["id"]], "web.internal",
                                              {ip[web1["id"]], ip[web3["id"]]}), timeout=10)
                # Started again, a machine has the address it had.
                assert (await client.post(f"/v1/apps/web/machines/{web2['id']}/start")
                        ).status_code == 200
                assert await private_ip(client, "web", web2["id"]) == ip[web2["id"]]
                await until(lambda: _resolves(p, 1, ip[web1["id"]], "syd.web.internal",
                                              {ip[web2["id"]], ip[web3["id"]]}), timeout=10)

                # A third host joins: peered by the others, its machines reached, no restart.
                w3 = await p.worker(3, "w3", "fra").start()
                daemons.append(w3)
                key3 = await public_key(tmp_path / "w3")
                await until(lambda: _peered(p, 1, wg[1], key3), timeout=30)
                web4 = await create(client, "web", "fra")
                ip[web4["id"]] = await private_ip(client, "web", web4["id"])
                await until(lambda: _fetches(p, 1, ip[web1["id"]], "http://fra.web.internal:8080/",
                                             f"{web4['id']} {ip[web4['id']]}"), timeout=30)

                # Host 2 dies: it drops out of every peer list.
                key2 = await public_key(tmp_path / "w2")
                assert key2 in await p.wg_peers(3, wg[3])
                await w2.kill9()
                await until(lambda: _unpeered(p, 1, wg[1], key2), timeout=60)
                await until(lambda: _unpeered(p, 3, wg[3], key2), timeout=60)
                # It comes back (re-adopting its machines): peered again, nobody restarted.
                await w2.start()
                await until(lambda: _peered(p, 1, wg[1], key2), timeout=60)
                await until(lambda: _fetches(p, 1, ip[web1["id"]],
                                             f"http://[{ip[web2['id']]}]:8080/",
                                             f"{web2['id']} {ip[web2['id']]}"), timeout=30)
        finally:
            for d in reversed(daemons):
                await d.stop()
            await p.reap()


async def _host_drops(p: PrivateHosts, index: int) -> int:
    """Packets host ``index``'s fence dropped on their way from machines to the host."""
    table = table_name(p.cluster_id, host_field(ipaddress.IPv4Network(p.subnet(index))))
    text = await run(*p.hosts.exec(index, "nft", "list", "chain", "inet", table,
                                   "from_machines"))
    found = re.search(r"counter packets (\d+) bytes \d+ drop", text)
    assert found is not None, text
    return int(found[1])


def _cli(broker: Daemon, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bodega", *argv, "--api-url", broker.url,
                           "--token", TOKEN], capture_output=True, text=True, timeout=60,
                          check=False)


async def _resolves(p: PrivateHosts, index: int, v4: str, name: str, want: set[str]) -> bool:
    return await p.resolve(index, v4, name) == want


async def _fetches(p: PrivateHosts, index: int, address: str, url: str, want: str) -> bool:
    return await p.fetch(index, address, url) == want


async def _peered(p: PrivateHosts, index: int, interface: str, key: str) -> bool:
    return key in await p.wg_peers(index, interface)


async def _unpeered(p: PrivateHosts, index: int, interface: str, key: str) -> bool:
    return key not in await p.wg_peers(index, interface)


def _sent(dump: str) -> int:
    return sum(int(line.split("\t")[6]) for line in dump.splitlines()[1:]
               if len(line.split("\t")) > 6)
