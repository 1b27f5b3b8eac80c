"""The piggyback channel a replication layer rides on: items, their budget, their spread."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import MAX_META_BYTES, MemberRecord, Role, Status
from bodega.registry.membership.core.messages import Direct, Item, Ping, encode
from bodega.registry.membership.core.outputs import ItemTooLarge, UnknownMember
from bodega.registry.sealing.core.envelope import SealedEnvelope
from bodega.registry.sealing.core.seal import OVERHEAD
from tests.keyring_kit import KEYRING
from tests.unit.registry.membership.swim_kit import (
    addr_of,
    delivered,
    learn,
    node,
    rec,
    sends,
    tick_until,
)

QUIET = SwimConfig(probe_interval=1000.0, push_pull_interval=1000.0)


def test_a_broadcast_item_rides_on_gossip_and_is_delivered_once_then_passed_on() -> None:
    a, b = node("a", config=QUIET), node("b", config=QUIET)
    learn(a, 0.0, rec("b"))
    item = Item("actor-1:7", {"table": "machines", "rows": [[1, "x"]]})
    a.broadcast(item)
    _, gossip = tick_until(a, 0.0, type(None))
    assert gossip.message.items == (item,)
    outs = b.receive(1.0, addr_of("a"), gossip.message)
    (got,) = delivered(outs)
    assert (got.item, got.sender, got.direct) == (item, "a", False)
    assert delivered(b.receive(1.1, addr_of("a"), gossip.message)) == []  # de-duplicated
    learn(b, 1.2, rec("c"))
    _, passed_on = tick_until(b, 1.2, type(None))
    assert item in passed_on.message.items


def test_items_are_sent_the_retransmit_limit_times() -> None:
    a = node("a", config=QUIET)
    learn(a, 0.0, *[rec(f"m{i}") for i in range(99)])  # n = 100: 4·ceil(log10 101) = 12
    a.broadcast(Item("k", {"v": 1}))
    carried = sum(len(s.message.items) for t in range(200) for s in sends(a.tick(t * 0.05)))
    assert carried == 12


def test_our_own_item_coming_back_is_not_delivered_to_us() -> None:
    a = node("a", config=QUIET)
    learn(a, 0.0, rec("b"))
    a.broadcast(Item("k", {}))
    _, gossip = tick_until(a, 0.0, type(None))
    assert delivered(a.receive(1.0, addr_of("b"), gossip.message)) == []


def test_membership_news_goes_before_items_when_space_is_short() -> None:
    a = node("a", config=QUIET)
    learn(a, 0.0, *[rec(f"member-{i:02d}") for i in range(30)])
    a.broadcast(Item("big", {"blob": "x" * 1000}))
    _, first = tick_until(a, 0.0, type(None))
    assert len(first.message.updates) >= 10
    assert first.message.items == ()


def test_too_large_items_are_refused_up_front() -> None:
    a = node("a")
    learn(a, 0.0, rec("b"))
    with pytest.raises(ItemTooLarge):
        a.broadcast(Item("k", {"blob": "x" * 1400}))
    with pytest.raises(ItemTooLarge):
        a.send_direct(0.0, "b", Item("k", {"blob": "x" * 1400}))
    a.broadcast(Item("k", {"blob": "x" * 1280}))  # fits, alone in a packet


def test_a_direct_item_goes_to_one_member_and_is_not_passed_on() -> None:
    a, b = node("a", config=QUIET), node("b", config=QUIET)
    learn(a, 0.0, rec("b"))
    learn(b, 0.0, rec("c"))
    item = Item("sync-req-1", {"want": {"actor-1": [3, 9]}})
    (send,) = sends(a.send_direct(1.0, "b", item))
    assert send.addr == addr_of("b")
    assert send.message.body == Direct(item)
    (got,) = delivered(b.receive(1.1, addr_of("a"), send.message))
    assert (got.item, got.direct) == (item, True)
    assert all(item not in s.message.items for t in range(40) for s in sends(b.tick(t * 0.1)))
    with pytest.raises(UnknownMember):
        a.send_direct(1.0, "nobody", item)


@given(sizes=st.lists(st.integers(min_value=0, max_value=1250), min_size=1, max_size=40),
       members=st.integers(min_value=0, max_value=60))
@settings(max_examples=60, deadline=None)
def test_every_packet_stays_within_the_udp_budget(sizes: list[int], members: int) -> None:
    envelope = SealedEnvelope(KEYRING, "a", first_seq=2**63, salts=os.urandom)
    a = node("a", config=SwimConfig(push_pull_interval=3.0))
    learn(a, 0.0, rec("peer-with-a-rather-long-name-0000000000000000000000000000000000"[:64]))
    learn(a, 0.0, *[rec(f"member-{i:03d}", meta={"api": f"http://10.2.{i}.1:4280"})
                    for i in range(members)])
    learn(a, 0.0, rec("member-000", status=Status.SUSPECT, by="z"))
    for i, size in enumerate(sizes):
        a.broadcast(Item(f"item-{i}", {"blob": "y" * size}))
    outs = [o for t in range(120) for o in sends(a.tick(t * 0.05))]
    assert outs
    for send in outs:
        assert len(envelope.seal(encode(send.message), 2**62)) <= 1400
    assert sum(len(s.message.items) for s in outs) > 0


def test_a_maximal_record_fits_next_to_any_body() -> None:
    biggest = MemberRecord(
        "n" * 64, ("h" * 253, 65535), Role.WORKER, "r" * 32,
        {"k": "v" * (MAX_META_BYTES - 10)}, 2**62 - 1, 2**62 - 1, Status.SUSPECT, "b" * 64)
    a = node("n" * 64)
    learn(a, 0.0, biggest)
    ping = a.piggyback.message("n" * 64, Ping(2**62 - 1, "t" * 64), limit=10, lead=biggest)
    assert len(encode(ping)) + OVERHEAD <= 1400
    assert ping.updates[0] == biggest


def test_probes_carry_news_too() -> None:
    a = node("a", config=SwimConfig(gossip_interval=1000.0, push_pull_interval=1000.0))
    learn(a, 0.0, rec("b"))
    a.broadcast(Item("k", {"v": 1}))
    _, ping = tick_until(a, 0.0, Ping)
    assert ping.message.items == (Item("k", {"v": 1}),)
    assert rec("b") in ping.message.updates


def test_a_row_change_is_not_starved_behind_a_membership_backlog() -> None:
    # A mass join queues hundreds of member records; a row change queued meanwhile
    # must ride on the next packet, not wait until every record has gone out.
    a = node("a", config=QUIET)
    learn(a, 0.0, *[rec(f"joiner-with-a-long-name-{i:04d}") for i in range(400)])
    assert len(a.piggyback.updates) >= 400
    item = Item("row:w1:7", {"r": ["workers", "w1", {"name": "w1", "pad": "x" * 600}, "w1", 7,
                                   1, 0]})
    a.broadcast(item)
    _, gossip = tick_until(a, 0.0, type(None))
    assert item in gossip.message.items
    assert gossip.message.updates  # membership still gets the rest of the packet
    assert len(encode(gossip.message)) <= a.config.payload_budget
