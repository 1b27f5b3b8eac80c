"""What the private network changes on a host, and how `bodega up` says it."""

from __future__ import annotations

from pathlib import Path

from bodega.cluster.host_network import HostChanges, banner, keeps_ra
from bodega.cluster.ports import choose_wireguard, remembered


def test_only_interfaces_that_take_an_address_from_router_advertisements_keep_taking_them() -> None:
    accept_ra = {"eth0": "1", "eth1": "0", "wlan0": "2", "all": "1", "lo": "1"}
    # eth0 learned an address from an advertisement and accepts them: it must go on doing
    # so once the host forwards. eth1 does not accept them, wlan0 already keeps them, lo
    # learned nothing.
    assert keeps_ra(accept_ra, ["eth0", "eth1", "wlan0", "eth0"]) == ["eth0"]
    assert keeps_ra(accept_ra, []) == []


def test_the_banner_names_every_object_the_private_network_puts_on_the_host() -> None:
    lines = banner(on=True, cluster_id="abcde", subnets=["10.209.1.0/24", "10.209.2.0/24"],
                   wireguard_ports=[27001, 24017],
                   changes=HostChanges(("net.ipv6.conf.all.forwarding",), ("eth0",)),
                   unable_why=None)
    assert lines[0].startswith("Private network: on, cluster abcde")
    assert "--no-private-network turns it off" in lines[0]
    assert "WireGuard bwgabcded101, bwgabcded102 on UDP 27001, 24017" in lines[1]
    assert "bodegafence_abcde_*" in lines[1]
    assert "bodega6pn_abcde_*" in lines[1]
    assert lines[2:] == [
        "  on this host: turned on net.ipv6.conf.all.forwarding=1 (left on when bodega stops)",
        "  on this host: set accept_ra=2 on eth0 (it keeps its address from router "
        "advertisements while forwarding)"]


def test_off_the_banner_says_why_and_what_still_fences_networks() -> None:
    (line,) = banner(on=False, cluster_id="abcde", subnets=[], wireguard_ports=[],
                     changes=HostChanges(), unable_why="IPv6 is off on this host")
    assert line == ("Private network: off (IPv6 is off on this host; --private-network turns "
                    "it on): networks are still fenced apart over IPv4 (nftables tables "
                    "bodegafence_abcde_*)")


def test_wireguard_ports_are_fixed_when_asked_for_and_remembered_otherwise(
        tmp_path: Path) -> None:
    fixed = choose_wireguard(tmp_path, ["ams-1", "ams-2"], 29400)
    assert fixed.ports == {"ams-1": 29400, "ams-2": 29401}
    free = choose_wireguard(tmp_path / "other", ["ams-1", "ams-2"], None)
    assert len(set(free.ports.values())) == 2
    assert remembered(tmp_path / "other").wireguard == free.ports
    # A restart keeps them (while free), as gossip ports are kept.
    assert choose_wireguard(tmp_path / "other", ["ams-1", "ams-2"], None).ports == free.ports
