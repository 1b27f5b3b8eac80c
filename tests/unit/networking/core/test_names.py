"""The resolver's answers: per name form, and only ever for the asker's own network."""

from __future__ import annotations

import ipaddress
from typing import Any

from bodega.model.rows import AppRow, IpAssignmentRow
from bodega.networking.core.directory import asker_network, directory
from bodega.networking.core.names import Directory, Machine, Outcome, answer
from bodega.networking.core.sixpn import Layout, network_field

LAYOUT = Layout(ipaddress.IPv6Network("fdaa:1:2::/48"))
NET, OTHER = "personal/default", "acme/default"
M = [Machine("m1", "web", "ams", "fdaa:1:2:1:a::2", "app"),
     Machine("m2", "web", "syd", "fdaa:1:2:2:a::2", "worker"),
     Machine("m3", "web", "ams", "fdaa:1:2:2:a::3", "app"),
     Machine("m9", "secret", "ams", "fdaa:1:2:1:b::2")]
DIR = Directory(machines=tuple(M), networks={"web": NET, "api": NET, "secret": OTHER},
                flycast={"web": ("fdaa:1:2:0:a::9",)})


def ask(name: str, qtype: str = "AAAA", network: str = NET, region: str = "syd") -> tuple[
        Outcome, tuple[str, ...], tuple[str, ...]]:
    reply = answer(name, qtype, network, DIR, region)
    return reply.outcome, reply.aaaa, reply.txt


def test_app_internal_lists_every_started_machine_of_the_app() -> None:
    assert ask("web.internal") == (Outcome.ANSWER, (M[0].address, M[1].address, M[2].address),
                                   ())
    assert ask("WEB.Internal.") == ask("web.internal")


def test_region_vm_process_and_nearest_forms() -> None:
    assert ask("ams.web.internal")[1] == (M[0].address, M[2].address)
    assert ask("m2.vm.web.internal")[1] == (M[1].address,)
    assert ask("nope.vm.web.internal")[0] is Outcome.NXDOMAIN
    assert ask("worker.process.web.internal")[1] == (M[1].address,)
    assert ask("top1.nearest.of.web.internal", region="syd")[1] == (M[1].address,)
    assert ask("top2.nearest.of.web.internal", region="ams")[1] == (M[0].address, M[2].address)
    assert ask("top0.nearest.of.web.internal")[0] is Outcome.NXDOMAIN


def test_txt_records_list_vms_regions_and_the_networks_apps() -> None:
    assert ask("vms.web.internal", "TXT")[2] == ("m1 ams,m2 syd,m3 ams",)
    assert ask("regions.web.internal", "TXT")[2] == ("ams,syd",)
    assert ask("_apps.internal", "TXT")[2] == ("api,web",)
    assert ask("_apps.internal", "TXT", network=OTHER)[2] == ("secret",)


def test_another_networks_app_does_not_exist_for_the_asker() -> None:
    assert ask("secret.internal")[0] is Outcome.NXDOMAIN
    assert ask("web.internal", network=OTHER)[0] is Outcome.NXDOMAIN
    assert ask("m1.vm.web.internal", network=OTHER)[0] is Outcome.NXDOMAIN
    assert ask("web.flycast", network=OTHER)[0] is Outcome.NXDOMAIN
    assert ask("secret.internal", network=OTHER)[1] == (M[3].address,)


def test_an_app_with_nothing_started_or_the_wrong_type_answers_empty() -> None:
    assert ask("api.internal") == (Outcome.ANSWER, (), ())
    assert ask("web.internal", "A") == (Outcome.ANSWER, (), ())
    assert ask("vms.web.internal", "AAAA") == (Outcome.ANSWER, (), ())


def test_names_outside_internal_are_recursed_and_flycast_answers() -> None:
    assert ask("example.com")[0] is Outcome.RECURSE
    assert ask("internal.example.com")[0] is Outcome.RECURSE
    assert ask("web.flycast") == (Outcome.ANSWER, ("fdaa:1:2:0:a::9",), ())
    assert ask("api.flycast") == (Outcome.ANSWER, (), ())
    assert ask("nothing.flycast")[0] is Outcome.NXDOMAIN


def test_the_directory_keeps_started_machines_with_private_addresses_only() -> None:
    address = str(LAYOUT.machine(3, network_field(NET), 2))
    machines: list[dict[str, Any]] = [
        {"id": "a", "app": "web", "region": "ams", "state": "started", "private_ip": address,
         "config": {"metadata": {"fly_process_group": "app"}}},
        {"id": "b", "app": "web", "region": "ams", "state": "stopped", "private_ip": address},
        {"id": "c", "app": "web", "region": "ams", "state": "started", "private_ip": "10.0.0.2"},
    ]
    apps = [AppRow(name="web", org_slug="personal"),
            AppRow(name="x", org_slug="acme", network="blue")]
    found = directory(machines, apps, [IpAssignmentRow(app="web", ip=address, type="private_v6"),
                                       IpAssignmentRow(app="web", ip="fdaa::1", type="private_v6"),
                                       IpAssignmentRow(app="web", ip=address, type="v6")],
                      LAYOUT, served={address, "fdaa::1"})
    assert [(m.id, m.group) for m in found.machines] == [("a", "app")]
    assert found.networks == {"web": NET, "x": "acme/blue"}
    assert found.flycast == {"web": (address,)}
    assert asker_network(address, found, LAYOUT) == NET
    assert asker_network(str(LAYOUT.machine(3, network_field("acme/blue"), 9)), found,
                         LAYOUT) == "acme/blue"
    assert asker_network(str(LAYOUT.machine(3, network_field("zz/none"), 9)), found,
                         LAYOUT) is None
    assert asker_network("10.0.0.2", found, LAYOUT) is None


def test_a_flycast_address_resolves_only_once_this_host_serves_it() -> None:
    address = str(LAYOUT.flycast(network_field(NET), "web"))
    rows = [IpAssignmentRow(app="web", ip=address, type="private_v6")]
    apps = [AppRow(name="web", org_slug="personal")]
    assert directory([], apps, rows, LAYOUT).flycast == {}
    assert directory([], apps, rows, LAYOUT, served={"fdaa::9"}).flycast == {}
    assert directory([], apps, rows, LAYOUT, served={address}).flycast == {"web": (address,)}
