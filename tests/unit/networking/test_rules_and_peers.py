"""The isolation rules say what they should; overlay peers follow rows and membership."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from bodega.model.rows import WorkerRow
from bodega.networking.core.peers import (
    Peer,
    RemovePeer,
    SetPeer,
    changes,
    overlay_of,
    parse_dump,
    transfer,
    wanted,
)
from bodega.networking.core.rules import Fence, Fence4, fence4_ruleset, removal, ruleset, table_name
from bodega.networking.core.sixpn import Layout
from bodega.networking.flycast import rewrite_head
from bodega.networking.overlay import OverlaySpec, routing, table_of, unrouting

LAYOUT = Layout(ipaddress.IPv6Network("fdaa:1:2::/48"))
FENCE = Fence(table_name("abcde", 0x0d05), LAYOUT, "bdgabcde0d05", "bvabcde0d05*", "bwgabcde0d05",
              flycast_ports=(8089,))


def test_only_the_local_networks_are_let_through_and_the_rest_dropped() -> None:
    text = ruleset(FENCE, {5, 0x00a7})
    assert "ip6 saddr & ::ffff:0:0:0 == ::5:0:0:0 ip6 daddr & ::ffff:0:0:0 == ::5:0:0:0 accept" \
        in text
    assert "== ::a7:0:0:0 accept" in text
    between = text.split("chain between")[1].split("}")[0]
    assert between.strip().endswith("counter drop")  # default deny after the accepts
    assert "ip6 saddr fdaa:1:2::/48 ip6 daddr fdaa:1:2::/48 jump between" in text


def test_machines_reach_the_resolver_and_flycast_on_the_host_and_nothing_else() -> None:
    text = ruleset(FENCE, {5})
    host = text.split("chain from_machines")[1].split("}\n}")[0]
    assert 'iifname { "bdgabcde0d05", "bwgabcde0d05" } jump from_machines' in text
    assert "ip6 daddr fdaa:1:2::3 udp dport 53 accept" in host
    assert "tcp dport 8089 accept" in host
    assert host.strip().endswith("counter drop")
    assert 'iifname "bvabcde0d05*" oifname "bvabcde0d05*" counter drop' in text


def test_a_ruleset_replaces_its_previous_version_in_one_go() -> None:
    text = ruleset(FENCE, set())
    first = text.index("delete table inet")
    assert text.index("table inet bodega6pn_abcde_0d05 {}") < first
    assert "delete table bridge bodega6pn_abcde_0d05" in removal(FENCE.table)


ROWS = [WorkerRow.model_validate({**doc, "region": "ams", "url": "http://x",
                                  "totals": {"cpus": 1, "memory_mb": 256}}) for doc in (
    {"name": "a", "wireguard": {"public_key": "KA=", "endpoint": "10.0.0.1:51820",
                                "block": "fdaa:1:2:1::/64"}},
    {"name": "b", "wireguard": {"public_key": "KB=", "endpoint": "10.0.0.2:51820",
                                "block": "fdaa:1:2:2::/64"}},
    {"name": "c", "wireguard": {"public_key": "KC=", "endpoint": "10.0.0.3:51820",
                                "block": "fdaa:1:2:3::/64"}},
    {"name": "d"},  # no overlay (a worker without a private network)
    {"name": "e", "wireguard": {"public_key": "KE=", "endpoint": "x", "block": "nonsense"}},
)]


def test_a_host_wants_every_other_live_host_with_an_overlay() -> None:
    statuses = {"a": "alive", "b": "suspect", "c": "dead", "d": "alive", "e": "alive"}
    assert sorted(wanted(ROWS, statuses, me="a")) == ["KB="]
    statuses["c"] = "alive"
    assert sorted(wanted(ROWS, statuses, me="a")) == ["KB=", "KC="]
    statuses["b"] = "left"
    assert sorted(wanted(ROWS, statuses, me="a")) == ["KC="]
    assert overlay_of(ROWS[4]) is None
    assert overlay_of(ROWS[3]) is None


DUMP = ("PRIV\tKA=\t51820\toff\n"
        "KB=\t(none)\t10.0.0.2:51820\tfdaa:1:2:2::/64\t1700000000\t1000\t2000\t25\n"
        "KX=\t(none)\t10.0.0.9:51820\tfdaa:1:2:9::/64\t0\t0\t0\t25\n")


def test_changes_remove_the_gone_add_the_new_and_leave_the_same() -> None:
    current = parse_dump(DUMP)
    want = wanted(ROWS, {"b": "alive", "c": "alive"}, me="a")
    steps = changes(current, want)
    assert steps == [RemovePeer("KX="), SetPeer(want["KC="])]
    assert steps[1].argv("wg0") == ["wg", "set", "wg0", "peer", "KC=", "endpoint",
                                    "10.0.0.3:51820", "allowed-ips", "fdaa:1:2:3::/64",
                                    "persistent-keepalive", "25"]
    moved = {**want, "KB=": Peer("KB=", "10.0.0.22:51820", "fdaa:1:2:2::/64")}
    assert changes(current, moved) == [RemovePeer("KX="), SetPeer(moved["KB="]),
                                       SetPeer(want["KC="])]
    settled = {k: Peer(k, p.endpoint, p.block) for k, p in want.items()}
    assert changes(settled, want) == []
    assert steps[0].describe() == "peer KX= removed"
    assert steps[1].describe() == "peer c (KC=) at 10.0.0.3:51820 for fdaa:1:2:3::/64"


def test_transfer_counters_are_read_per_peer() -> None:
    assert transfer(DUMP)["KB="].received == 1000
    assert transfer(DUMP)["KB="].sent == 2000


def test_a_flycast_request_head_is_routed_by_the_apps_proxy_name() -> None:
    head = b"POST /x HTTP/1.1\r\nHOST: web.flycast\r\nContent-Length: 5\r\nAccept: */*"
    rewritten, length = rewrite_head(head, "web.localhost")
    assert rewritten == (b"POST /x HTTP/1.1\r\nHost: web.localhost\r\nContent-Length: 5\r\n"
                         b"Accept: */*")
    assert length == 5
    chunked = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked"
    assert rewrite_head(chunked, "web.localhost") == (
        b"POST / HTTP/1.1\r\nHost: web.localhost\r\nTransfer-Encoding: chunked", None)
    assert rewrite_head(b"GET / HTTP/1.1", "web.localhost")[1] == 0


def test_the_fence_judges_only_packets_in_or_out_of_its_own_bridge_or_overlay() -> None:
    """Workers sharing a kernel each fence their own machines: one with no machine of a
    network must not drop another worker's packets in it."""
    forward = ruleset(FENCE, {5}).split("chain forward")[1].split("chain between")[0]
    judged = [line.strip() for line in forward.splitlines() if "jump between" in line]
    assert judged == [
        'iifname { "bdgabcde0d05", "bwgabcde0d05" } ip6 saddr fdaa:1:2::/48 '
        "ip6 daddr fdaa:1:2::/48 jump between",
        'oifname { "bdgabcde0d05", "bwgabcde0d05" } ip6 saddr fdaa:1:2::/48 '
        "ip6 daddr fdaa:1:2::/48 jump between"]


def test_what_leaves_a_block_goes_into_its_own_overlay_and_its_own_block_stays_local() -> None:
    spec = OverlaySpec(interface="bwgabcde0d05", key_dir=Path("/nowhere"), listen_port=51820,
                       endpoint="192.0.2.1:51820", block="fdaa:1:2:d05::/64",
                       cluster="fdaa:1:2::/48", bridge="bdgabcde0d05", table=table_of(0x0d05))
    table = str(0x6B0D05)
    assert routing(spec) == [
        ["ip", "-6", "route", "replace", "fdaa:1:2:d05::/64", "dev", "bdgabcde0d05",
         "table", table],
        ["ip", "-6", "route", "replace", "fdaa:1:2::/48", "dev", "bwgabcde0d05", "table", table],
        ["ip", "-6", "rule", "add", "from", "fdaa:1:2:d05::/64", "lookup", table,
         "priority", "20000"]]
    assert unrouting(spec)[:7] == ["ip", "-6", "rule", "del", "from", "fdaa:1:2:d05::/64",
                                   "lookup"]
    assert table_of(0x0d05) != table_of(0x0d06)  # two workers on one kernel: two tables


FENCE4 = Fence4("bodegafence_abcde_0d05", "bdgabcde0d05", "bvabcde0d05*", private=False)


def _between(text: str, family: str) -> list[str]:
    """The ``between`` chain's rules of the table of ``family``."""
    table = text.split(f"table {family} {FENCE4.table} {{\n", 2)[-1]
    chain = table.split("chain between {\n", 1)[1].split("}", 1)[0]
    return [line.strip() for line in chain.splitlines() if line.strip()]


def _set(text: str, family: str, name: str) -> set[str]:
    table = text.split(f"table {family} {FENCE4.table} {{\n", 2)[-1]
    body = table.split(f"set {name} {{\n", 1)[1].split("}\n", 1)[0]
    if "elements" not in body:
        return set()
    listed = body.split("elements = {", 1)[1].split("}", 1)[0]
    return {item.strip().strip('"') for item in listed.split(",") if item.strip()}


def test_the_ipv4_fence_lets_machines_meet_only_within_their_network() -> None:
    text = fence4_ruleset(
        FENCE4, {"bvabcde0d0502": "personal/default", "bvabcde0d0503": "personal/blue",
                 "bvabcde0d0504": "personal/default"},
        {"10.13.5.2": "personal/default", "10.13.5.3": "personal/blue",
         "10.13.6.7": "personal/default", "10.13.6.8": "personal/blue"},
        ["10.13.5.0/24", "10.13.6.0/24", "10.13.5.0/24"])
    # Routed into this worker's bridge from any machine subnet: same network or dropped.
    assert f'oifname "{FENCE4.bridge}" ip saddr @subnets jump between' in text
    assert _set(text, "inet", "subnets") == {"10.13.5.0/24", "10.13.6.0/24"}
    assert _between(text, "inet") == ["ip saddr @net0 ip daddr @net0 accept",
                                      "ip saddr @net1 ip daddr @net1 accept", "counter drop"]
    assert [_set(text, "inet", f"net{i}") for i in range(2)] == [
        {"10.13.5.3", "10.13.6.8"}, {"10.13.5.2", "10.13.6.7"}]
    # On the bridge, between machine ports: the same, by port.
    assert f'iifname "{FENCE4.machine_ports}" oifname "{FENCE4.machine_ports}" jump between' \
        in text
    assert [_set(text, "bridge", f"net{i}") for i in range(2)] == [
        {"bvabcde0d0503"}, {"bvabcde0d0502", "bvabcde0d0504"}]
    assert _between(text, "bridge")[-1] == "counter drop"


def test_with_the_private_network_no_machine_meets_another_over_ipv4() -> None:
    private = Fence4(FENCE4.table, FENCE4.bridge, FENCE4.machine_ports, private=True)
    text = fence4_ruleset(private, {"bvabcde0d0502": "personal/default"},
                          {"10.13.5.2": "personal/default", "10.13.6.7": "personal/default"},
                          ["10.13.5.0/24"])
    assert _between(text, "inet") == ["counter drop"]
    # Its bridge table goes: the private network's own drops every frame between ports.
    assert f"delete table bridge {FENCE4.table}" in text
    assert f"table bridge {FENCE4.table} {{\n" not in text


def test_an_empty_fence_drops_between_every_machine_and_replaces_its_last_version() -> None:
    text = fence4_ruleset(FENCE4, {}, {}, [])
    assert _between(text, "inet") == _between(text, "bridge") == ["counter drop"]
    assert _set(text, "inet", "subnets") == set()
    for family in ("inet", "bridge"):
        first = text.index(f"delete table {family} {FENCE4.table}")
        assert text.index(f"table {family} {FENCE4.table} {{}}") < first
