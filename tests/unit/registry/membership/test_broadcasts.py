"""Transmit-limited queues, the seen-set, and packing news into the packet budget."""

from __future__ import annotations

from bodega.registry.membership.core.broadcasts import SeenKeys, TransmitQueue


def test_each_value_is_taken_until_the_limit_then_dropped() -> None:
    q: TransmitQueue[str] = TransmitQueue()
    q.push("a", "A", 10)
    counts = [len(q.take(100, limit=3)[0]) for _ in range(5)]
    assert counts == [1, 1, 1, 0, 0]
    assert "a" not in q


def test_least_sent_goes_first_and_sizes_respect_the_budget() -> None:
    q: TransmitQueue[str] = TransmitQueue()
    q.push("old", "OLD", 10)
    assert q.take(100, limit=5) == (["OLD"], 11)
    q.push("new", "NEW", 10)
    # Room for one: the value sent fewer times wins.
    assert q.take(11, limit=5) == (["NEW"], 11)
    assert q.take(22, limit=5) == (["NEW", "OLD"], 22)
    # Too big for the room: skipped, though the least sent; smaller ones still fit.
    q.push("big", "BIG", 50)
    taken, used = q.take(30, limit=5)
    assert sorted(taken) == ["NEW", "OLD"]
    assert used == 22
    assert q.transmits("big") == 0


def test_a_value_queued_again_replaces_the_old_and_starts_over() -> None:
    q: TransmitQueue[str] = TransmitQueue()
    q.push("b", "v1", 5)
    q.take(100, limit=2)
    q.push("b", "v2", 5)
    assert q.transmits("b") == 0
    assert q.take(100, limit=2)[0] == ["v2"]
    assert len(q) == 1


def test_a_shrinking_limit_drops_values_already_sent_that_often() -> None:
    q: TransmitQueue[str] = TransmitQueue()
    q.push("a", "A", 5)
    for _ in range(3):
        q.take(100, limit=8)
    assert q.take(100, limit=3) == ([], 0)
    assert len(q) == 0


def test_a_full_queue_evicts_the_most_sent() -> None:
    q: TransmitQueue[str] = TransmitQueue(max_entries=2)
    q.push("a", "A", 5)
    q.push("b", "B", 5)
    q.take(6, limit=9)  # sends only B (newest first among equals)
    q.push("c", "C", 5)
    assert "b" not in q
    assert "a" in q
    assert "c" in q
    assert q.dropped == 1


def test_seen_keys_expire_and_are_bounded() -> None:
    seen = SeenKeys(max_keys=2, ttl=10.0)
    assert seen.add(0.0, "x")
    assert not seen.add(5.0, "x")
    assert seen.add(10.0, "x")  # expired
    seen.add(11.0, "y")
    seen.add(12.0, "z")  # evicts the oldest
    assert len(seen) == 2
    assert seen.add(13.0, "x")
