"""A machine's private address over rtnetlink: what ``ip -batch`` made, without the ip.

Real namespaces: one given its address and routes by ``netlink.give``, one by the
``ip`` commands it stands for; the kernel must hold the same in both.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from bodega.networking import netlink

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

ADDRESS = ipaddress.IPv6Address("fdaa:0:1:a7b:1:2::5")
GATEWAY = ipaddress.IPv6Address("fdaa:0:1:a7b::1")
BATCH = (f"addr replace {ADDRESS}/128 dev eth0 nodad\n"
         f"route replace {GATEWAY} dev eth0\n"
         f"route replace ::/0 via {GATEWAY} dev eth0\n")


def ip(*argv: str, stdin: str | None = None) -> str:
    return subprocess.run(["ip", *argv], input=stdin, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str]]:
    """Two namespaces, each with an ``eth0`` up (a veth whose peer stays inside)."""
    names = (f"bodega-nl-{os.getpid()}-a", f"bodega-nl-{os.getpid()}-b")
    for name in names:
        ip("netns", "add", name)
        ip("-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "peer0")
        ip("-n", name, "link", "set", "eth0", "up")
    try:
        yield names
    finally:
        for name in names:
            subprocess.run(["ip", "netns", "del", name], check=False)


def held(netns: str) -> tuple[list[Any], list[Any]]:
    """eth0's IPv6 addresses and the IPv6 routes, as the kernel reports them."""
    addresses = json.loads(ip("-n", netns, "-j", "-6", "addr", "show", "dev", "eth0"))
    routes = json.loads(ip("-n", netns, "-j", "-6", "route", "show"))
    kept = [{k: a[k] for k in ("local", "prefixlen", "scope", "noprefixroute", "nodad")
             if k in a} for a in addresses[0]["addr_info"]
            if not a["local"].startswith("fe80")]
    return kept, [r for r in routes if not r["dst"].startswith("fe80")]


async def test_the_kernel_holds_what_ip_would_have_made(namespaces: tuple[str, str]) -> None:
    given, batched = namespaces
    await netlink.give(given, ADDRESS, GATEWAY)
    ip("-n", batched, "-batch", "-", stdin=BATCH)
    assert held(given) == held(batched)
    addresses, routes = held(given)
    assert addresses == [{"local": str(ADDRESS), "prefixlen": 128, "scope": "global",
                          "nodad": True}]
    assert {r["dst"] for r in routes} >= {str(GATEWAY), "default"}
    # Again, as a start after its create gives it again: nothing changes, nothing fails.
    await netlink.give(given, ADDRESS, GATEWAY)
    assert held(given) == held(batched)


async def test_the_namespace_is_entered_by_a_thread_of_its_own(
        namespaces: tuple[str, str]) -> None:
    """The loop's threads, the pool's ones included, stay in the host's namespace."""
    host = os.stat("/proc/self/ns/net").st_ino
    await netlink.give(namespaces[0], ADDRESS, GATEWAY)
    for _ in range(4):
        pooled = await asyncio.to_thread(lambda: os.stat("/proc/thread-self/ns/net").st_ino)
        assert pooled == host
    assert os.stat("/proc/thread-self/ns/net").st_ino == host


async def test_a_failure_says_what_could_not_be_given(namespaces: tuple[str, str]) -> None:
    with pytest.raises(OSError, match="no network namespace bodega-nl-gone"):
        await netlink.give("bodega-nl-gone", ADDRESS, GATEWAY)
    with pytest.raises(OSError, match="no device eth9 in network namespace"):
        await netlink.give(namespaces[0], ADDRESS, GATEWAY, device="eth9")
    ip("-n", namespaces[0], "link", "set", "eth0", "down")  # no route through a link down
    with pytest.raises(OSError, match=r"cannot give eth0 in .* its route to the gateway"):
        await netlink.give(namespaces[0], ADDRESS, GATEWAY)


async def test_a_kept_link_gives_the_same_from_the_loops_own_thread(
        namespaces: tuple[str, str]) -> None:
    """``Link``: a socket made in the namespace once; the loop's thread sends on it and
    stays in the host's namespace."""
    kept, batched = namespaces
    host = os.stat("/proc/thread-self/ns/net").st_ino
    link = await netlink.open_link(kept)
    try:
        assert os.stat("/proc/thread-self/ns/net").st_ino == host
        await link.give(ADDRESS, GATEWAY)
        ip("-n", batched, "-batch", "-", stdin=BATCH)
        assert held(kept) == held(batched)
        await link.give(ADDRESS, GATEWAY)  # again (a start after the create): no change
        assert held(kept) == held(batched)
        ip("-n", kept, "link", "set", "eth0", "down")
        with pytest.raises(OSError, match=r"cannot give eth0 in .* its route to the gateway"):
            await link.give(ADDRESS, GATEWAY)
        ip("-n", kept, "link", "set", "eth0", "up")
        await link.give(ADDRESS, GATEWAY)  # the refused call's acks are not taken for these
        assert held(kept) == held(batched)
    finally:
        link.close()


async def test_a_link_knows_its_namespace_from_another_of_the_same_name(
        namespaces: tuple[str, str]) -> None:
    name = namespaces[0]
    link = await netlink.open_link(name)
    try:
        assert link.current()
        ip("netns", "del", name)
        assert not link.current()
        ip("netns", "add", name)  # the same name, another namespace
        assert not link.current()
    finally:
        link.close()
    with pytest.raises(OSError, match="no device eth0 in network namespace"):
        await netlink.open_link(name)  # the new one has no eth0
    with pytest.raises(OSError, match="no network namespace bodega-nl-gone"):
        await netlink.open_link("bodega-nl-gone")
