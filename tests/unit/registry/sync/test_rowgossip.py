"""Rows on gossip in a daemon: what a member does with a row it hears (``rowgossip.py``).

Membership is a recorder here (the decisions are what is tested: what is applied, what
goes on gossip, who is pushed what); the replica is real, on an in-memory view.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from bodega.registry import RegistryConfig, RegistryNode
from bodega.registry.membership.core.messages import Item
from bodega.registry.membership.core.outputs import Delivered
from bodega.registry.replication.core.rows import Change, Row
from bodega.registry.sync.core.peers import AGENT_SYNC_INTERVAL, SYNC_INTERVAL
from bodega.registry.sync.core.rowwire import row_item
from bodega.registry.sync.rowgossip import RowGossip
from tests.keyring_kit import KEYRING
from tests.unit.registry.replication.row_kit import machine_doc, metrics, replica, row

PEERS = [f"agent-{i}" for i in range(10)]


class Recorder:
    """Membership as RowGossip sees it: ten other live agents that hold a replica."""

    def __init__(self) -> None:
        self.broadcasts: list[Item] = []
        self.direct: list[tuple[str, Item]] = []

    def holders(self) -> list[str]:
        return list(PEERS)

    def broadcast(self, item: Item) -> None:
        self.broadcasts.append(item)

    def send_direct(self, name: str, item: Item) -> None:
        self.direct.append((name, item))


def gossip(recorder: Recorder, *, push_on: bool = True) -> tuple[RowGossip, list[Change]]:
    applied: list[Change] = []
    node = RowGossip("me", replica("me"), recorder, metrics(), eager_peers=3,
                     rng=random.Random(1), on_changes=lambda changes, _: applied.extend(changes),
                     stopped=lambda: False, push_on=push_on)
    return node, applied


async def hear(node: RowGossip, *heard: tuple[Item, bool]) -> None:
    for item, direct in heard:
        node.heard(Delivered(item, sender="agent-0", direct=direct))
    await asyncio.sleep(0)  # the loop turn that applies them together


async def test_a_row_new_here_is_pushed_on_once_to_as_many_members() -> None:
    recorder = Recorder()
    node, applied = gossip(recorder)
    item = row_item(row("machines", "m1", machine_doc("m1", "w1"), "w1", 5), 4)
    # Heard twice in one turn (pushed by one member, gossiped by another), then again later.
    await hear(node, (item, True), (item, False))
    assert [c.new.key for c in applied if c.new is not None] == ["m1"]
    pushed = [name for name, sent in recorder.direct if sent == item]
    assert len(set(pushed)) == len(pushed) == 3
    assert "me" not in pushed
    assert recorder.broadcasts == [item]  # pushed to us: membership does not gossip it on
    await hear(node, (item, True))
    assert len(recorder.direct) == 3  # held already: not sent again
    assert recorder.broadcasts == [item]


async def test_a_row_heard_on_gossip_is_pushed_on_and_left_to_membership_to_gossip() -> None:
    recorder = Recorder()
    node, _ = gossip(recorder)
    item = row_item(row("machines", "m2", machine_doc("m2", "w1"), "w1", 7), 6)
    await hear(node, (item, False))
    assert len(recorder.direct) == 3
    assert recorder.broadcasts == []


async def test_a_refused_row_is_not_pushed_on() -> None:
    recorder = Recorder()
    node, applied = gossip(recorder)
    # A machine whose content names another worker than its owner is refused: never known
    # here, so each time it came it would look new; pushed on, it would go round for ever.
    bad = row_item(row("machines", "m3", machine_doc("m3", "w2"), "w1", 9), 8)
    await hear(node, (bad, True))
    await hear(node, (bad, True))
    assert applied == []
    assert recorder.direct == []


async def test_a_daemon_with_a_replica_of_its_own_does_not_push_on() -> None:
    """Without an agent every process on a host is a replica: pushing on from each would
    cost the host a few packets per process for every row."""
    recorder = Recorder()
    node, applied = gossip(recorder, push_on=False)
    item = row_item(row("machines", "m4", machine_doc("m4", "w1"), "w1", 3), 2)
    await hear(node, (item, True))
    assert [c.new.key for c in applied if c.new is not None] == ["m4"]
    assert recorder.direct == []
    assert recorder.broadcasts == [item]  # still gossiped on, as a pushed item always was


def test_a_hosts_agent_pushes_on_and_pulls_more_often_than_a_daemon_with_its_own_replica(
        tmp_path: Path) -> None:
    def config(role: str, **given: float) -> RegistryConfig:
        return RegistryConfig(name=role, role=role, region="ams", data_dir=tmp_path / role,
                              keyring=KEYRING, **given)  # type: ignore[arg-type]

    assert config("agent").pull_interval == AGENT_SYNC_INTERVAL < SYNC_INTERVAL
    for role in ("worker", "broker", "proxy"):
        assert config(role).pull_interval == SYNC_INTERVAL
    assert config("agent", sync_interval=3.0).pull_interval == 3.0  # as given
    for role, pushes_on in (("agent", True), ("worker", False), ("proxy", False)):
        node = RegistryNode(config(role), registry=CollectorRegistry())
        try:
            assert node._gossip.push_on is pushes_on, role
        finally:
            node.view.close()


async def test_a_version_seen_already_is_not_applied_again() -> None:
    recorder = Recorder()
    node, _ = gossip(recorder)
    applied_rows: list[list[str]] = []
    apply = node.replica.apply

    def counting(rows: list[Row], **given: Any) -> list[Change]:
        applied_rows.append([r.key for r in rows])
        return apply(rows, **given)

    node.replica.apply = counting  # type: ignore[method-assign,assignment]
    first = row_item(row("machines", "m5", machine_doc("m5", "w1"), "w1", 11), 10)
    second = row_item(row("machines", "m6", machine_doc("m6", "w1"), "w1", 12), 10)
    await hear(node, (first, True), (first, False))
    await hear(node, (first, True), (first, True))  # copies only: nothing to write
    await hear(node, (first, True), (second, True))
    assert applied_rows == [["m5"], ["m6"]]


async def test_a_row_of_our_own_is_never_pushed_on_and_one_of_an_earlier_life_is_noticed(
        ) -> None:
    recorder = Recorder()
    node, _ = gossip(recorder)
    mine = node.replica.write("machines", "m7", machine_doc("m7", "me"), shared=False)
    assert mine is not None
    assert mine.new is not None
    echo = row_item(mine.new, node.replica.floor)
    await hear(node, (echo, True))
    told = [node.replica.lost_tail]
    earlier = row_item(row("machines", "m8", machine_doc("m8", "me"), "me", 1), 0)
    await hear(node, (earlier, True))
    told.append(node.replica.lost_tail)  # a row of a life we hold no record of: pull
    assert told == [False, True]
    assert recorder.direct == []
    assert recorder.broadcasts == []
