"""Wiring a machine's namespace: complete, from few processes, and undone in one."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bodega.runtime import cluster_id
from bodega.worker.host import netns as netns_module
from bodega.worker.host.core.names import HostNames
from bodega.worker.host.netns import NetnsNetwork
from bodega.worker.host.network import run as run_ip
from tests.cidr_kit import held_octet

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


@pytest.fixture
async def network() -> AsyncIterator[NetnsNetwork]:
    subnet = f"10.{held_octet('netns-wiring', 232, 248)}.{100 + os.getpid() % 50}.0/24"
    wired = NetnsNetwork(ipaddress.ip_network(subnet), HostNames(cluster_id.new()))
    await wired.setup()
    try:
        yield wired
    finally:
        await wired.teardown()


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Every ip command the network runs from now on, as it runs them."""
    calls: list[tuple[str, ...]] = []

    async def counted(*argv: str, stdin: bytes | None = None, check: bool = True) -> str:
        calls.append(argv)
        return await run_ip(*argv, stdin=stdin, check=check)

    monkeypatch.setattr(netns_module, "run", counted)
    return calls


def inside(network: NetnsNetwork, index: int, *argv: str) -> str:
    return subprocess.run(["ip", "-n", network.netns(index), *argv], check=True,
                          capture_output=True, text=True).stdout


async def test_a_namespace_is_wired_by_two_processes_and_unwired_by_one(
        network: NetnsNetwork, spawned: list[tuple[str, ...]]) -> None:
    await network.prewarm([7])
    assert len(spawned) == 2, spawned
    assert network.ready(7)
    assert f"inet {network.address(7)}/24" in inside(network, 7, "-4", "addr", "show", "eth0")
    assert f"default via {network.gateway}" in inside(network, 7, "route")
    assert "UP" in inside(network, 7, "link", "show", "lo")
    master = Path(f"/sys/class/net/{network.veth(7)}/master").resolve().name
    assert master == network.bridge

    spawned.clear()
    await network.detach("m", 7)
    assert len(spawned) == 1, spawned
    assert not network.ready(7)
    assert not Path(f"/run/netns/{network.netns(7)}").exists()
    assert not Path(f"/sys/class/net/{network.veth(7)}").exists()


async def test_a_veth_off_our_bridge_is_not_wired(network: NetnsNetwork) -> None:
    """Taken off the bridge, or put on another one, the host end no longer reaches the
    machine's gateway: the address is wired again before a create takes it."""
    await network.prewarm([8])
    veth = network.veth(8)
    other = f"bgo{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "link", "add", other, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "link", "set", veth, "nomaster"], check=True)
        assert not network.ready(8)
        subprocess.run(["ip", "link", "set", veth, "master", other], check=True)
        assert not network.ready(8)
        subprocess.run(["ip", "link", "set", veth, "master", network.bridge], check=True)
        assert network.ready(8)
    finally:
        subprocess.run(["ip", "link", "del", other], check=True)
        await network.detach("m", 8)


async def test_a_half_wired_namespace_is_rebuilt_whole(network: NetnsNetwork) -> None:
    # A crash between the namespace and its veth: the namespace alone is left.
    subprocess.run(["ip", "netns", "add", network.netns(9)], check=True)
    assert not network.ready(9)
    await network.attach("m", 9)
    assert network.ready(9)
    assert f"inet {network.address(9)}/24" in inside(network, 9, "-4", "addr", "show", "eth0")


async def test_a_namespace_wired_ahead_holds_a_link_for_its_first_attach_only(
        network: NetnsNetwork) -> None:
    """With a private network (``links``), the link (a netlink socket made inside as the
    namespace is wired) is what a create's attach gives the private address through, once;
    one nobody took is closed with its namespace, which it would otherwise keep alive."""
    await network.prewarm([10])
    assert network.take_link(10) is None  # no private network: no socket at all
    network.links = True
    await network.prewarm([11])
    link = network.take_link(11)
    assert link is not None
    assert link.current()
    assert network.take_link(11) is None  # once
    link.close()
    # Unwired before any attach took it: closed with the namespace.
    await network.prewarm([12])
    kept = network._links[12]  # what the worker holds, looked at
    await network.detach("m", 12)
    assert kept.sock.fileno() == -1
    assert network.take_link(12) is None
    # One deleted behind the worker's back (and made again) is not given through.
    await network.prewarm([13])
    subprocess.run(["ip", "netns", "del", network.netns(13)], check=True)
    subprocess.run(["ip", "netns", "add", network.netns(13)], check=True)
    assert network.take_link(13) is None
    # The worker stopping lets go of those it still holds.
    await network.prewarm([14])
    kept = network._links[14]
    network.close()
    assert kept.sock.fileno() == -1
    assert network.take_link(14) is None
    assert network.ready(14)  # the namespace itself stays, for the next life to take


async def test_the_gateways_mac_stays_as_machines_come_and_go(network: NetnsNetwork) -> None:
    """A bridge left to itself takes its lowest port's MAC: each machine wired or unwired
    could change the gateway's, under the neighbour entries the other machines hold."""
    def bridge_mac() -> str:
        return Path(f"/sys/class/net/{network.bridge}/address").read_text().strip()

    assert bridge_mac() == network.gateway_mac
    for index in (9, 10, 11):
        await network.prewarm([index])
        assert bridge_mac() == network.gateway_mac
    await network.detach("m", 10)
    assert bridge_mac() == network.gateway_mac


async def test_an_address_wired_again_drops_the_hosts_neighbour_entry_for_it(
        network: NetnsNetwork) -> None:
    """An address's last occupant may have answered at another MAC (a VM that arrived by a
    live move keeps its source's): the host's entry for it, left behind, would send the
    next occupant's packets to a MAC nothing answers until it went stale (half a minute
    of a machine unreachable through the proxy)."""
    def entry() -> str:
        return subprocess.run(["ip", "neigh", "show", network.address(12), "dev",
                               network.bridge], check=True, capture_output=True,
                              text=True).stdout
    # Another machine keeps the bridge's carrier up (a bridge with no port up loses
    # its neighbour entries, as a host's busy bridge never does).
    await network.prewarm([12, 13])
    subprocess.run(["ip", "neigh", "replace", network.address(12), "lladdr",
                    "02:bd:ff:ff:ff:01", "dev", network.bridge, "nud", "reachable"], check=True)
    await network.detach("moved-away", 12)
    await network.prewarm([12])
    assert "02:bd:ff:ff:ff:01" not in entry(), entry()
