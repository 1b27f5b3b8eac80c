"""The resolver's wire answers: DNS packets in, DNS packets out, per asker's network."""

from __future__ import annotations

import ipaddress

from dnslib import QTYPE, RCODE, DNSRecord

from bodega.networking.core.names import Directory, Machine
from bodega.networking.core.sixpn import Layout, network_field
from bodega.networking.resolver import Resolver, host_upstreams

LAYOUT = Layout(ipaddress.IPv6Network("fdaa:1:2::/48"))
WEB = network_field("personal/default")
WEB_IP = str(LAYOUT.machine(5, WEB, 2))
DIRECTORY = Directory(machines=(Machine("m1", "web", "ams", WEB_IP),),
                      networks={"web": "personal/default"})


def resolver() -> Resolver:
    return Resolver(LAYOUT, "ams", lambda: DIRECTORY)


def ask(name: str, qtype: str, source: str) -> DNSRecord:
    out = resolver().reply(bytes(DNSRecord.question(name, qtype).pack()), source)
    assert out is not None
    return DNSRecord.parse(out)


def test_a_machine_gets_its_apps_addresses() -> None:
    reply = ask("web.internal", "AAAA", str(LAYOUT.machine(9, WEB, 3)))
    assert reply.header.rcode == RCODE.NOERROR
    assert [str(rr.rdata) for rr in reply.rr] == [WEB_IP]
    assert reply.rr[0].rtype == QTYPE.AAAA


def test_txt_answers_and_nxdomain_for_unknown_apps() -> None:
    reply = ask("_apps.internal", "TXT", WEB_IP)
    assert [str(rr.rdata) for rr in reply.rr] == ['"web"']
    assert ask("nope.internal", "AAAA", WEB_IP).header.rcode == RCODE.NXDOMAIN


def test_an_asker_outside_any_known_network_is_refused() -> None:
    other = str(LAYOUT.machine(9, network_field("acme/blue"), 3))
    assert ask("web.internal", "AAAA", other).header.rcode == RCODE.REFUSED
    assert ask("web.internal", "AAAA", "10.0.0.5").header.rcode == RCODE.REFUSED


def test_other_names_are_left_to_recursion_and_garbage_is_dropped() -> None:
    query = bytes(DNSRecord.question("example.com", "A").pack())
    assert resolver().reply(query, WEB_IP) is None
    assert resolver().reply(b"\x00\x01garbage", WEB_IP) == b""
    assert host_upstreams("# x\nnameserver 10.0.0.53\nnameserver ::1\nsearch a\n") == [
        "10.0.0.53", "::1"]


def test_a_repeated_query_is_answered_from_the_cache_until_the_view_changes() -> None:
    now, current = [0.0], [DIRECTORY]
    cached = Resolver(LAYOUT, "ams", lambda: current[0], clock=lambda: now[0])
    query = DNSRecord.question("web.internal", "AAAA")
    first = cached.reply(bytes(query.pack()), WEB_IP)
    query.header.id = (query.header.id + 1) % 65536
    second = cached.reply(bytes(query.pack()), WEB_IP)
    assert first is not None
    assert second is not None
    assert DNSRecord.parse(second).header.id == query.header.id  # the asker's id, not the first's
    assert [str(rr.rdata) for rr in DNSRecord.parse(second).rr] == [WEB_IP]
    moved = str(LAYOUT.machine(6, WEB, 7))
    current[0] = Directory(machines=(Machine("m1", "web", "ams", moved),),
                           networks={"web": "personal/default"})
    now[0] = 1.0  # past the snapshot's freshness: the view is read again, and differs
    third = cached.reply(bytes(query.pack()), WEB_IP)
    assert third is not None
    assert [str(rr.rdata) for rr in DNSRecord.parse(third).rr] == [moved]
