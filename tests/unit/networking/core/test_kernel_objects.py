"""Which of the private network's kernel objects on a host are a cluster's (or some of its
hosts'): fence tables of both names and both families, WireGuard interfaces, the
wireguard-go serving one and its socket, and the source rule of a host's block.

Pure: what ``nft -j list tables`` and ``ip -j -6 rule show`` print, link names and
command lines, given to ``pick`` as text (no host is read).
"""

from __future__ import annotations

import json

from bodega.networking.core.kernel_objects import (
    NetworkLeftovers,
    Rule,
    Scope,
    Table,
    interface_name,
    pick,
    table_of,
)
from bodega.networking.core.rules import table_name
from bodega.networking.core.sixpn import Layout, cluster_prefix

CID, OTHER = "kq3x9", "m0zz1"
HERE, THERE = 0xD101, 0xD102  # two hosts (workers) of the cluster on this kernel


def block(cluster_id: str, host: int) -> str:
    return str(Layout(cluster_prefix(cluster_id)).host_block(host))


def nft(*tables: tuple[str, str]) -> str:
    return json.dumps({"nftables": [{"metainfo": {"version": "1.0.6"}}, *(
        {"table": {"family": family, "name": name, "handle": i}}
        for i, (family, name) in enumerate(tables))]})


def rule(src: str, table: int | str, priority: int = 20000) -> dict[str, object]:
    address, length = src.split("/")
    return {"priority": priority, "src": address, "srclen": int(length), "table": str(table)}


TABLES = nft(
    ("inet", table_name(CID, HERE)), ("bridge", table_name(CID, HERE)),
    ("inet", f"bodegafence_{CID}_{HERE:04x}"), ("bridge", f"bodegafence_{CID}_{HERE:04x}"),
    ("inet", table_name(CID, THERE)), ("bridge", f"bodegafence_{CID}_{THERE:04x}"),
    ("inet", table_name(OTHER, HERE)), ("inet", "bodega_partition"),
    ("ip", table_name(CID, HERE)),  # not a family bodega writes its fence in
    ("inet", f"{table_name(CID, HERE)}x"))
RULES = json.dumps([
    {"priority": 0, "src": "all", "table": "local"},
    rule(block(CID, HERE), table_of(HERE)), rule(block(CID, HERE), table_of(HERE)),
    rule(block(CID, THERE), table_of(THERE)),
    rule(block(OTHER, HERE), table_of(HERE)),  # another cluster's, on this kernel
    rule(block(CID, HERE), table_of(HERE), priority=20001),
    rule(block(CID, HERE), 254),  # someone's own rule from the block, to main
    rule("fd00:1:2:3::/64", table_of(HERE)),
    {"priority": 32766, "src": "all", "table": "main"}])
LINKS = ["lo", "eth0", interface_name(CID, HERE), interface_name(CID, THERE),
         interface_name(OTHER, HERE), "bdgkq3x9d101", "bwgkq3x9"]
HERE_CMDS = {10: ["wireguard-go", interface_name(CID, HERE)],
             11: ["/usr/bin/wireguard-go", interface_name(CID, THERE)],
             12: ["wireguard-go", interface_name(OTHER, HERE)],
             13: ["python3", "-m", "bodega", "worker", interface_name(CID, HERE)], 14: []}
SOCKETS = [f"/var/run/wireguard/{name}.sock" for name in (
    interface_name(CID, HERE), interface_name(CID, 0xD103), interface_name(CID, 0xD104),
    interface_name(OTHER, 0xD105))]
ELSEWHERE = {20: ["wireguard-go", interface_name(CID, 0xD104)]}  # another host's, alive


def picked(scope: Scope) -> NetworkLeftovers:
    return pick(scope, tables=TABLES, rules=RULES, links=LINKS, commands=HERE_CMDS,
                elsewhere=ELSEWHERE, sockets=SOCKETS)


def test_a_whole_cluster_takes_every_host_field_of_its_id_and_nothing_else() -> None:
    found = picked(Scope(CID))
    assert found.tables == tuple(sorted([
        Table("bridge", f"bodegafence_{CID}_{HERE:04x}"),
        Table("bridge", f"bodegafence_{CID}_{THERE:04x}"),
        Table("bridge", table_name(CID, HERE)),
        Table("inet", f"bodegafence_{CID}_{HERE:04x}"),
        Table("inet", table_name(CID, HERE)), Table("inet", table_name(CID, THERE))]))
    assert found.interfaces == (interface_name(CID, HERE), interface_name(CID, THERE))
    assert found.rules == tuple(sorted([Rule(block(CID, HERE), table_of(HERE)),
                                        Rule(block(CID, HERE), table_of(HERE)),
                                        Rule(block(CID, THERE), table_of(THERE))]))
    assert found.daemons == ((10, interface_name(CID, HERE)), (11, interface_name(CID, THERE)))
    # A socket goes unless a wireguard-go still serves it; those killed here go too.
    assert found.sockets == tuple(sorted(
        f"/var/run/wireguard/{interface_name(CID, h)}.sock" for h in (HERE, 0xD103)))


def test_some_hosts_of_a_cluster_take_their_own_fields_only() -> None:
    found = picked(Scope(CID, frozenset({HERE})))
    assert {t.name for t in found.tables} == {table_name(CID, HERE),
                                              f"bodegafence_{CID}_{HERE:04x}"}
    assert len(found.tables) == 4  # inet and bridge, both names
    assert found.interfaces == (interface_name(CID, HERE),)
    assert set(found.rules) == {Rule(block(CID, HERE), table_of(HERE))}
    assert found.daemons == ((10, interface_name(CID, HERE)),)
    assert found.sockets == (f"/var/run/wireguard/{interface_name(CID, HERE)}.sock",)
    assert not picked(Scope(CID, frozenset()))


def test_a_starting_cluster_spares_the_host_fields_of_the_workers_it_runs() -> None:
    found = picked(Scope(CID, spared=frozenset({HERE})))
    assert found.interfaces == (interface_name(CID, THERE),)
    assert {t.name for t in found.tables} == {table_name(CID, THERE),
                                              f"bodegafence_{CID}_{THERE:04x}"}
    assert set(found.rules) == {Rule(block(CID, THERE), table_of(THERE))}
    rest = picked(Scope(CID, spared=frozenset({HERE, THERE})))
    assert (rest.tables, rest.interfaces, rest.rules, rest.daemons) == ((), (), (), ())
    assert rest.sockets == (f"/var/run/wireguard/{interface_name(CID, 0xD103)}.sock",)


def test_another_cluster_finds_only_its_own() -> None:
    found = picked(Scope(OTHER))
    assert found.tables == (Table("inet", table_name(OTHER, HERE)),)
    assert found.interfaces == (interface_name(OTHER, HERE),)
    assert found.rules == (Rule(block(OTHER, HERE), table_of(HERE)),)
    assert found.daemons == ((12, interface_name(OTHER, HERE)),)
    assert found.sockets == (f"/var/run/wireguard/{interface_name(OTHER, 0xD105)}.sock",)


def test_what_a_tool_could_not_list_is_nothing() -> None:
    assert not pick(Scope(CID), tables="", rules="", links=[], commands={}, elsewhere={},
                    sockets=[])
    assert not pick(Scope(CID), tables="Error: Operation not permitted", rules="[{]",
                    links=[], commands={}, elsewhere={}, sockets=[])


def test_removal_takes_each_table_even_if_gone_and_each_rule_as_often_as_listed() -> None:
    found = NetworkLeftovers(
        tables=(Table("inet", "bodega6pn_kq3x9_d101"), Table("bridge", "bodega6pn_kq3x9_d101")),
        rules=(Rule("fdaa:1:2:d101::/64", table_of(HERE)),
               Rule("fdaa:1:2:d101::/64", table_of(HERE))))
    assert found.nft_input() == (
        "table inet bodega6pn_kq3x9_d101 {}\ndelete table inet bodega6pn_kq3x9_d101\n"
        "table bridge bodega6pn_kq3x9_d101 {}\ndelete table bridge bodega6pn_kq3x9_d101\n")
    table = table_of(HERE)
    assert found.ip_input() == (
        f"rule del from fdaa:1:2:d101::/64 lookup {table} priority 20000\n" * 2
        + f"route flush table {table}\n")
    assert found.lines()[-1] == \
        f"routing rule from fdaa:1:2:d101::/64 lookup {table} priority 20000"
