"""The ledger: seen versions per origin with a digest that compares in constant size."""

from __future__ import annotations

import pytest

from bodega.registry.membership.core.buckets import BUCKETS, bucket_of, differing
from bodega.registry.replication.core.known import EMPTY, Known
from bodega.registry.replication.core.ledger import Ledger


def ledger(local: str, **known: Known) -> Ledger:
    return Ledger(local, dict(known))


def test_equal_versions_give_equal_digests_whatever_the_order_they_were_learned_in() -> None:
    a = ledger("a", w1=Known(5), w2=Known(9, ((3, 4),)))
    b = Ledger("b")
    b.set("w2", Known(2))
    b.set("w2", Known(9, ((3, 4),)))
    b.set("w1", Known(5))
    assert a.digest() == b.digest()
    assert differing(a.digest(), b.digest()) == []


def test_a_difference_shows_in_the_bucket_of_its_origin_only() -> None:
    a = ledger("a", w1=Known(5), w2=Known(9))
    b = ledger("b", w1=Known(5), w2=Known(10))
    assert differing(a.digest(), b.digest()) == [bucket_of("w2")]
    assert "w2" in list(a.origins_in([bucket_of("w2")]))
    assert "w1" not in list(a.origins_in([bucket_of("w2")])) or \
        bucket_of("w1") == bucket_of("w2")


def test_the_digest_is_the_same_size_for_ten_origins_or_ten_thousand() -> None:
    small = Ledger("x", {f"w{i}": Known(i + 1) for i in range(10)})
    large = Ledger("x", {f"w{i}": Known(i + 1) for i in range(10_000)})
    assert len(small.digest()) == len(large.digest()) == BUCKETS


def test_an_origin_with_nothing_seen_is_no_origin_at_all() -> None:
    a = ledger("a", w1=Known(5))
    a.set("w2", Known(3))
    a.set("w2", EMPTY)
    assert "w2" not in a
    assert a.digest() == ledger("b", w1=Known(5)).digest()


def test_missing_is_kept_as_versions_are_learned_and_excludes_the_local_node() -> None:
    a = Ledger("a")
    a.set("w1", Known(9, ((3, 4),)))
    a.set("a", Known(9, ((1, 8),)))  # our own gaps are not something to pull
    assert a.missing() == {"w1": 2}
    assert a.behind
    a.set("w1", Known(9))
    assert a.missing() == {}
    assert not a.behind


def test_a_failed_journal_undoes_every_change_made_in_it() -> None:
    a = ledger("a", w1=Known(5, ((2, 2),)))
    before = (a.copy(), a.digest(), a.missing())

    def fail_midway() -> None:
        with a.journal():
            a.set("w1", Known(7))
            a.set("w2", Known(3, ((1, 1),)))
            a.set("w1", Known(8))
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        fail_midway()
    assert (a.copy(), a.digest(), a.missing()) == before
    with a.journal():
        a.set("w1", Known(7))
    assert a.get("w1") == Known(7)


def test_a_horizon_only_rises_and_rolls_back_with_the_journal_like_the_versions() -> None:
    a = Ledger("a", {"w1": Known(9)}, {"w1": 5, "w3": 0})
    assert not a.raise_horizon("w1", 3)
    assert (a.horizon("w1"), a.horizon("w2"), a.horizon("w3")) == (5, 0, 0)

    def fail_midway() -> None:
        with a.journal():
            assert a.raise_horizon("w1", 9)
            assert a.raise_horizon("w2", 2)
            a.set("w2", Known(2))
            raise RuntimeError("the disk is full")

    with pytest.raises(RuntimeError):
        fail_midway()
    assert (a.horizon("w1"), a.horizon("w2"), a.get("w2")) == (5, 0, EMPTY)
    with a.journal():
        assert a.raise_horizon("w1", 9)
    assert a.horizon("w1") == 9
