"""Real membership nodes on loopback UDP (ephemeral ports), several in one process."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from bodega.registry.membership import Membership, MembershipConfig
from bodega.registry.membership.core.members import Addr, EventKind, Status
from bodega.registry.membership.core.messages import Item, Ping, decode
from bodega.registry.membership.core.outputs import Delivered, Event
from bodega.registry.membership.transport import MemoryNetwork, Receiver, Transport, UdpTransport
from bodega.registry.sealing.core.envelope import SealedEnvelope
from bodega.registry.sealing.core.keyring import Keyring
from tests.integration.registry.node_kit import FAST, until
from tests.keyring_kit import KEYRING, other_keyring, payload_of


class Nodes:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.running: list[Membership] = []

    async def start(self, name: str, *, seeds: tuple[str, ...] = (), keyring: Keyring = KEYRING,
                    **kw: object) -> Membership:
        config = MembershipConfig(
            name=name, role=kw.pop("role", "worker"), region="ams",  # type: ignore[arg-type]
            data_dir=self.root / name, keyring=keyring, seeds=seeds, swim=FAST,
            meta={"api": f"http://127.0.0.1/{name}"}, leave_timeout=0.3, **kw)  # type: ignore[arg-type]
        node = Membership(config, registry=CollectorRegistry())
        await node.start()
        self.running.append(node)
        return node

    async def stop(self, node: Membership, *, leave: bool) -> None:
        self.running.remove(node)
        await node.stop(leave=leave)


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[Nodes]:
    group = Nodes(tmp_path)
    yield group
    for node in list(group.running):
        await group.stop(node, leave=False)


def seed_of(node: Membership) -> str:
    return f"127.0.0.1:{node.addr[1]}"


def alive_names(node: Membership) -> set[str]:
    return {m.name for m in node.members() if m.status is Status.ALIVE}


def stat(node: Membership, name: str, **labels: str) -> float:
    return node.metrics.registry.get_sample_value(name, labels) or 0.0


def bad(node: Membership, reason: str) -> float:
    return stat(node, "bodega_gossip_bad_packets_total", reason=reason)


def collector(into: list[Delivered]) -> Callable[[Event | Delivered], None]:
    def listen(out: Event | Delivered) -> None:
        if isinstance(out, Delivered):
            into.append(out)
    return listen


async def test_nodes_join_through_a_seed_and_see_each_others_metadata(nodes: Nodes) -> None:
    first = await nodes.start("w1")
    assert first.addr[1] != 0  # the ephemeral port that was bound
    others = [await nodes.start(f"w{i}", seeds=(seed_of(first),)) for i in range(2, 5)]
    everyone = {"w1", "w2", "w3", "w4"}
    await until(lambda: all(alive_names(n) == everyone for n in [first, *others]))
    view = others[2].member("w2")
    assert view is not None
    assert (view.role, view.region, view.meta) == (
        "worker", "ams", {"api": "http://127.0.0.1/w2", "keys": KEYRING.report()})
    assert view.addr == others[0].addr
    assert stat(first, "bodega_gossip_packets_total", direction="in") > 0
    assert stat(first, "bodega_gossip_packets_total", direction="out") > 0


async def test_a_stopped_node_is_declared_dead_and_a_leaving_one_left(nodes: Nodes) -> None:
    first = await nodes.start("w1")
    rest = [await nodes.start(f"w{i}", seeds=(seed_of(first),)) for i in range(2, 6)]
    await until(lambda: all(len(alive_names(n)) == 5 for n in [first, *rest]))
    feed = first.events()
    await nodes.stop(rest[0], leave=False)  # as if it crashed
    await until(lambda: all(n.member("w2").status is Status.DEAD  # type: ignore[union-attr]
                            for n in [first, *rest[1:]]))
    kinds = []
    async for event in feed:
        kinds.append((event.member.name, event.kind))
        if event.kind is EventKind.DEAD:
            break
    assert kinds[-1] == ("w2", EventKind.DEAD)
    assert set(kinds) <= {("w2", EventKind.SUSPECT), ("w2", EventKind.DEAD)}
    # Some node's own suspicion timer ran out (the others may have heard it from it).
    await until(lambda: sum(stat(n, "bodega_swim_deaths_total") for n in [first, *rest[1:]]) >= 1)
    await nodes.stop(rest[1], leave=True)
    await until(lambda: all(n.member("w3").status is Status.LEFT  # type: ignore[union-attr]
                            for n in [first, *rest[2:]]))


async def test_packets_with_a_wrong_key_or_garbage_are_dropped_and_counted(
        nodes: Nodes) -> None:
    first = await nodes.start("w1")
    intruder = await nodes.start("mallory", seeds=(seed_of(first),),
                                 keyring=other_keyring("another cluster"))
    # The intruder keeps retrying its join, sealed with a key w1 does not hold.
    await until(lambda: bad(first, "unknown_key") >= 3)
    assert first.member("mallory") is None
    assert alive_names(intruder) == {"mallory"}
    assert not intruder.swim.joined
    assert bad(intruder, "unknown_key") == bad(intruder, "auth") == 0  # w1 never answered it

    ours = SealedEnvelope(KEYRING, "x", first_seq=1, salts=os.urandom)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
        raw.sendto(b"not even close", first.addr)
        raw.sendto(ours.seal(b'{"t":"ping","f":"x"}', 1), first.addr)
        raw.sendto(ours.seal(b"x" * 2000, 1), first.addr)
    await until(lambda: bad(first, "auth") == 1 and bad(first, "decode") == 1
                and bad(first, "size") == 1)
    friend = await nodes.start("w2", seeds=(seed_of(first),))
    await until(lambda: alive_names(first) == alive_names(friend) == {"w1", "w2"})


async def test_a_restarted_node_rejoins_from_its_saved_peers_as_the_next_generation(
        nodes: Nodes) -> None:
    first = await nodes.start("w1")
    second = await nodes.start("w2", seeds=(seed_of(first),))
    third = await nodes.start("w3", seeds=(seed_of(first),))
    await until(lambda: all(len(alive_names(n)) == 3 for n in (first, second, third)))
    await nodes.stop(third, leave=False)
    saved = json.loads((nodes.root / "w3" / "membership.json").read_text())
    assert saved["generation"] == 1
    assert set(saved["peers"]) == {"w1", "w2"}
    await until(lambda: first.member("w3").status is Status.DEAD)  # type: ignore[union-attr]

    again = await nodes.start("w3")  # no seeds: only what it remembered
    assert again.swim.generation == 2
    await until(lambda: all(
        (m := n.member("w3")) is not None and m.status is Status.ALIVE and m.generation == 2
        for n in (first, second)))
    assert first.member("w3").addr == again.addr  # type: ignore[union-attr]
    assert json.loads((nodes.root / "w3" / "membership.json").read_text())["generation"] == 2


async def test_items_reach_every_member_and_direct_items_one(nodes: Nodes) -> None:
    first = await nodes.start("w1")
    rest = [await nodes.start(f"w{i}", seeds=(seed_of(first),)) for i in range(2, 5)]
    await until(lambda: all(len(alive_names(n)) == 4 for n in [first, *rest]))
    got: dict[str, list[Delivered]] = {n.swim.name: [] for n in rest}
    for n in rest:
        n.add_listener(collector(got[n.swim.name]))
    feed = rest[0].items()
    first.broadcast(Item("actor-w1:1", {"rows": [1, 2, 3]}))
    await until(lambda: all(any(d.item.key == "actor-w1:1" for d in g) for g in got.values()))
    first.send_direct("w3", Item("need-w1", {"from": 1}))
    await until(lambda: any(d.direct for d in got["w3"]))
    assert not any(d.direct for d in got["w2"] + got["w4"])
    assert (await anext(feed)).item.key == "actor-w1:1"
    assert all(len([d for d in g if d.item.key == "actor-w1:1"]) == 1 for g in got.values())


async def test_membership_runs_unchanged_on_the_in_memory_transport(tmp_path: Path) -> None:
    net = MemoryNetwork()
    members: list[Membership] = []
    for i in range(3):
        config = MembershipConfig(
            name=f"m{i}", role="broker", region="ams", data_dir=tmp_path / f"m{i}",
            keyring=KEYRING, swim=FAST,
            seeds=(f"127.0.0.1:{members[0].addr[1]}",) if members else ())
        member = Membership(config, bind=net.bind)
        await member.start()
        members.append(member)
    events = members[0].events()
    try:
        await until(lambda: all(len(alive_names(m)) == 3 for m in members))
        net.blocked.add(members[2].addr)
        await until(lambda: members[0].member("m2").status is Status.DEAD)  # type: ignore[union-attr]
        events.close()
        assert [e.kind async for e in events if e.member.name == "m2"][-1] is EventKind.DEAD
    finally:
        for member in members:
            await member.stop(leave=False)


class StallAfterPings:
    """A UDP endpoint that blocks the whole event loop right after sending a ping.

    The peer's ack then arrives while our probe's deadline has already passed
    by the time the loop runs again: a daemon stalled by a slow call.
    """

    def __init__(self, stalls: int, seconds: float) -> None:
        self.stalls = stalls
        self.seconds = seconds

    async def bind(self, host: str, port: int, receiver: Receiver) -> Transport:
        inner = await UdpTransport.bind(host, port, receiver)
        outer = self

        class Stalling:
            local_addr = inner.local_addr

            def send(self, data: bytes, addr: Addr) -> bool:
                sent = inner.send(data, addr)
                if outer.stalls and isinstance(decode(payload_of(data)).body, Ping):
                    outer.stalls -= 1
                    asyncio.get_running_loop().call_soon(time.sleep, outer.seconds)
                return sent

            def close(self) -> None:
                inner.close()

        return Stalling()


async def test_a_stalled_event_loop_is_measured_and_accuses_nobody(tmp_path: Path) -> None:
    stalling = StallAfterPings(stalls=0, seconds=1.2)
    group: list[Membership] = []
    for i in range(1, 5):
        config = MembershipConfig(
            name=f"w{i}", role="worker", region="ams", data_dir=tmp_path / f"w{i}",
            keyring=KEYRING, swim=FAST,
            seeds=(seed_of(group[0]),) if group else ())
        member = Membership(config, registry=CollectorRegistry(), bind=stalling.bind)
        await member.start()
        group.append(member)
    seen: list[Event] = []
    try:
        await until(lambda: all(len(alive_names(n)) == 4 for n in group))
        for n in group:
            n.add_listener(lambda out: seen.append(out) if isinstance(out, Event) else None)
        stalling.stalls = 5
        await until(lambda: stalling.stalls == 0)
        await until(lambda: all(stat(n, "bodega_swim_probes_total") >= 12 for n in group))
        # Every node measured the stalls: a tick is due at most IDLE_TICK (0.5 s) after the
        # last, so one due in a stall of 1.2 s runs at least 0.7 s late (not always past 1 s:
        # that depends on where in the stall it fell). Pings sent in one turn of the loop
        # stall it back to back, so a tick may run more than 5 s late: any bucket above.
        assert all(stat(n, "bodega_swim_loop_lag_seconds_bucket", le="+Inf")
                   - stat(n, "bodega_swim_loop_lag_seconds_bucket", le="0.5") >= 1
                   for n in group)
        assert [e for e in seen if e.kind is not EventKind.ALIVE] == []
        assert sum(stat(n, "bodega_swim_probe_failures_total") for n in group) == 0
    finally:
        for member in group:
            await member.stop(leave=False)



async def test_a_member_no_seed_answers_says_so_and_one_that_joins_says_nothing(
        nodes: Nodes, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A joined host restarted while the host it joined through is gone must not wait in
    silence: its members warn, now and then, that nobody answers, naming whom they tried."""
    from bodega.registry.membership import udp

    monkeypatch.setattr(udp, "ALONE_FIRST_WARNING", 0.3)
    monkeypatch.setattr(udp, "ALONE_CHECK", 0.05)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as held:
        held.bind(("127.0.0.1", 0))
        seed = f"127.0.0.1:{held.getsockname()[1]}"  # bound, never answering
        caplog.set_level("INFO", logger="bodega.registry")
        lonely = await nodes.start("lonely", seeds=(seed,))
        await until(lambda: any("no member of the cluster has answered" in r.getMessage()
                                for r in caplog.records), timeout=10)
        warned = [r for r in caplog.records if "has answered" in r.getMessage()]
        assert warned[0].levelname == "WARNING"
        assert seed in warned[0].getMessage()
    first = await nodes.start("first")
    await nodes.stop(lonely, leave=False)
    caplog.clear()
    again = await nodes.start("lonely", seeds=(seed, seed_of(first)))
    await until(lambda: alive_names(again) >= {"first"}, timeout=10)
    assert not any("has answered" in r.getMessage() for r in caplog.records)
