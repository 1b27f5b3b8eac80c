"""Sealed gossip between real registry nodes on loopback UDP (and HTTP for anti-entropy).

A packet captured from the wire and sent again is dropped and counted, even
after its sender restarted; a packet sealed with another cluster's key is
dropped and counted; a key rotation under a steady stream of row writes
loses no member and no row and drops no packet; a node that was down during
a rotation comes back with the old key alone, cannot gossip, catches up over
HTTP and gossips again; a rotation a live member cannot take stops where
every member still gossips.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from bodega.model.errors import Conflict
from bodega.registry import EventKind, Membership, MembershipConfig, RegistryNode, Status
from bodega.registry.membership.core.members import Addr
from bodega.registry.membership.core.messages import Message, encode
from bodega.registry.membership.core.outputs import Event
from bodega.registry.membership.transport import Receiver, UdpTransport
from bodega.registry.sealing import keyfile
from bodega.registry.sealing.core.envelope import SealedEnvelope
from bodega.registry.sealing.core.keyring import GossipKey, Keyring
from tests.integration.registry.node_kit import FAST, Nodes, Running, until
from tests.keyring_kit import KEYRING, other_keyring

DROPS = ("auth", "unknown_key", "replay", "decode", "size", "error")


def bad(node: RegistryNode, reason: str) -> float:
    value = node.metrics.registry.get_sample_value("bodega_gossip_bad_packets_total",
                                                   {"reason": reason})
    return value or 0.0


def drops(node: RegistryNode) -> dict[str, float]:
    return {reason: bad(node, reason) for reason in DROPS if bad(node, reason)}


def alive(node: RegistryNode) -> set[str]:
    return {m.name for m in node.members() if m.status is Status.ALIVE}


class Tap:
    """A UDP endpoint that keeps a copy of every packet it sends, as a sniffer would."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, Addr]] = []

    async def bind(self, host: str, port: int, receiver: Receiver) -> UdpTransport:
        inner = await UdpTransport.bind(host, port, receiver)
        send = inner.send

        def keep(data: bytes, addr: Addr) -> bool:
            self.sent.append((data, addr))
            return send(data, addr)

        inner.send = keep  # type: ignore[method-assign]
        return inner

    async def next_to(self, addr: Addr) -> bytes:
        """The next packet sent to ``addr`` from now on."""
        start = len(self.sent)

        def sent() -> list[bytes]:
            return [d for d, a in self.sent[start:] if a == addr]

        await until(lambda: bool(sent()))
        return sent()[0]


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[Nodes]:
    group = Nodes(tmp_path)
    yield group
    await group.stop_all()


async def cluster(nodes: Nodes, names: list[str], **kw: object) -> list[Running]:
    first = await nodes.start(names[0], **kw)  # type: ignore[arg-type]
    rest = [await nodes.start(n, seeds=(first.seed,), **kw)  # type: ignore[arg-type]
            for n in names[1:]]
    everyone = [first, *rest]
    await until(lambda: all(alive(r.node) == set(names) for r in everyone))
    return everyone


async def test_a_packet_captured_and_sent_again_is_dropped_and_counted(nodes: Nodes) -> None:
    tap = Tap()
    a = await nodes.start("a", udp=tap.bind)
    b = await nodes.start("b", seeds=(a.seed,))
    await until(lambda: alive(a.node) == alive(b.node) == {"a", "b"})
    captured = await tap.next_to(b.node.gossip_addr)  # b has it, or has it queued first
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as attacker:
        attacker.sendto(captured, b.node.gossip_addr)
        await until(lambda: bad(b.node, "replay") == 1)
        # Its sender restarts (the next generation); the old packet is still refused.
        await nodes.stop("a", leave=False)
        a = await nodes.start("a", udp=tap.bind)
        await tap.next_to(b.node.gossip_addr)  # the new life has reached b
        await until(lambda: alive(b.node) == {"a", "b"})
        attacker.sendto(captured, b.node.gossip_addr)
        await until(lambda: bad(b.node, "replay") == 2)
    assert drops(b.node) == {"replay": 2}
    assert alive(b.node) == alive(a.node) == {"a", "b"}


async def test_gossip_sealed_with_another_key_is_dropped_and_counted(nodes: Nodes) -> None:
    ours, = await cluster(nodes, ["a"])
    theirs = await nodes.start("mallory", seeds=(ours.seed,),
                               keyring=other_keyring("another cluster"))
    await until(lambda: bad(ours.node, "unknown_key") >= 3)  # its join, retried
    assert alive(ours.node) == {"a"}
    assert ours.node.membership.member("mallory") is None
    assert not theirs.node.membership.swim.joined
    # A key id we hold, but the packet was not sealed with its key: a forged tag.
    forged = Keyring((GossipKey(b"\0" * 32),), GossipKey(b"\0" * 32).id)
    packet = bytearray(SealedEnvelope(forged, "mallory", first_seq=1, salts=lambda n: b"\1" * n)
                       .seal(encode(Message("mallory")), 1))
    packet[1:5] = KEYRING.primary_key.raw_id
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
        raw.sendto(bytes(packet), ours.node.gossip_addr)
    await until(lambda: bad(ours.node, "auth") == 1)
    assert set(drops(ours.node)) == {"auth", "unknown_key"}


async def test_a_rotation_under_steady_writes_loses_no_member_no_row_and_no_packet(
        nodes: Nodes, tmp_path: Path) -> None:
    names = ["a", "b", "c", "d", "e"]
    files = {n: tmp_path / f"{n}.keyring" for n in names}
    for path in files.values():
        keyfile.write(path, KEYRING)
    everyone = {n: r for n, r in zip(names, [await nodes.start(
        n, keyring_file=files[n], seeds=(nodes.running["a"].seed,) if n != "a" else ())
        for n in names], strict=True)}
    await until(lambda: all(alive(r.node) == set(names) for r in everyone.values()))
    trouble: list[Event] = []
    for running in everyone.values():
        running.node.membership.add_listener(
            lambda out: trouble.append(out) if isinstance(out, Event)
            and out.kind in (EventKind.SUSPECT, EventKind.DEAD) else None)
    written = dict.fromkeys(names, 0)
    writing = True

    async def write(name: str) -> None:
        node = everyone[name].node
        while writing:
            written[name] += 1
            node.put_owned("workers", name, {"name": name, "region": "ams", "url": "http://x",
                                             "cordoned": False, "n": written[name]})
            await asyncio.sleep(0.02)

    writers = [asyncio.create_task(write(n)) for n in names]
    try:
        await until(lambda: min(written.values()) >= 10)
        rotation = await everyone["c"].node.keys.rotate(timeout=30)
        await asyncio.sleep(1.0)  # writes go on under the new key alone
    finally:
        writing = False
        await asyncio.gather(*writers)
    assert [s.step for s in rotation.steps] == ["install", "use", "remove"]
    assert rotation.removed == [KEYRING.primary]
    new = everyone["a"].node.membership.keyring
    assert new.ids == (rotation.new,)
    await until(lambda: all(r.node.membership.keyring == new for r in everyone.values()))
    # Every row's last write reached every node.
    await until(lambda: all((r.node.get("workers", n) or {}).get("n") == written[n]
                            for r in everyone.values() for n in names))
    assert trouble == []
    assert {n: drops(r.node) for n, r in everyone.items()} == {n: {} for n in names}
    assert {keyfile.read(p) for p in files.values()} == {new}

    def listed() -> list[tuple[str, bool, list[str], list[str]]]:
        return [(k.id, k.primary, k.members, k.sealing)
                for k in everyone["e"].node.keys.listing().keys]

    # What each member says it holds reaches e by gossip, a round or so after the keyring.
    await until(lambda: listed() == [(rotation.new, True, names, names)])
    assert KEYRING.primary_key.encoded() not in everyone["e"].node.keys.listing(
        ).model_dump_json()


async def test_a_node_down_during_a_rotation_comes_back_and_catches_up_over_http(
        nodes: Nodes, tmp_path: Path) -> None:
    names = ["a", "b", "c", "x"]
    files = {n: tmp_path / f"{n}.keyring" for n in names}
    for path in files.values():
        keyfile.write(path, KEYRING)
    for n in names:
        await nodes.start(n, keyring_file=files[n],
                          seeds=(nodes.running["a"].seed,) if n != "a" else ())
    await until(lambda: all(alive(r.node) == set(names) for r in nodes.running.values()))
    await nodes.stop("x", leave=False)
    a = nodes.running["a"].node
    await until(lambda: a.membership.member("x").status is Status.DEAD)  # type: ignore[union-attr]
    rotation = await a.keys.rotate(timeout=30)
    a.put_owned("workers", "a", {"name": "a", "region": "ams", "url": "http://x",
                                 "cordoned": False, "while": "x was away"})
    assert keyfile.read(files["x"]) == KEYRING  # its host never heard of the new key

    refused = bad(a, "unknown_key")
    x = (await nodes.start("x", keyring_file=files["x"],
                           seeds=(nodes.running["a"].seed,))).node
    # Its join is sealed with a key nobody holds any more: dropped and counted...
    await until(lambda: bad(a, "unknown_key") > refused)
    # ...until it pulls the keyring over HTTP (the cluster token, not the gossip key).
    await until(lambda: x.membership.keyring.ids == (rotation.new,))
    await until(lambda: all(alive(r.node) == set(names) for r in nodes.running.values()))
    await until(lambda: (x.get("workers", "a") or {}).get("while") == "x was away")
    assert keyfile.read(files["x"]).ids == (rotation.new,)
    assert bad(x, "auth") == bad(x, "replay") == 0


async def test_a_rotation_a_member_cannot_take_stops_where_every_member_still_gossips(
        nodes: Nodes, tmp_path: Path) -> None:
    a, b = await cluster(nodes, ["a", "b"])
    # A member that gossips but keeps no replica: it never hears of the new keyring.
    deaf = Membership(MembershipConfig(
        name="deaf", role="worker", region="ams", data_dir=tmp_path / "deaf", keyring=KEYRING,
        seeds=(a.seed,), swim=FAST), registry=CollectorRegistry())
    await deaf.start()
    try:
        await until(lambda: alive(a.node) == alive(b.node) == {"a", "b", "deaf"})
        rotating = asyncio.create_task(a.node.keys.rotate(timeout=2))
        await asyncio.sleep(0)
        with pytest.raises(Conflict, match="already running"):
            await a.node.keys.rotate(timeout=2)
        with pytest.raises(Conflict, match="stopped at 'install': deaf had not installed"):
            await rotating
        # The new key is installed beside the old one, which everyone still seals with.
        installed = a.node.membership.keyring
        assert (len(installed.ids), installed.primary) == (2, KEYRING.primary)
        await until(lambda: b.node.membership.keyring == installed)
        await asyncio.sleep(2 * FAST.probe_interval)
        assert alive(a.node) == alive(b.node) == {"a", "b", "deaf"}
        assert drops(a.node) == drops(b.node) == {}
    finally:
        await deaf.stop(leave=False)
