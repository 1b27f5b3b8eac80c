"""Merge is the max of a total order: commutative, associative, idempotent.

And the replica's apply, which is merge plus bookkeeping in SQLite, ends in
the same state whatever order (and however often) rows arrive.
"""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from bodega.registry.replication.core.rows import Row, merge, newer
from tests.unit.registry.replication.row_kit import owned_rows, replica, row, shared_rows

same_row = st.one_of(owned_rows(), shared_rows())


def pairs(strategy: st.SearchStrategy[Row], n: int) -> st.SearchStrategy[list[Row]]:
    return st.lists(strategy, min_size=n, max_size=n)


@given(st.one_of(pairs(owned_rows(), 2), pairs(shared_rows(), 2)))
def test_merge_is_commutative(rows: list[Row]) -> None:
    a, b = rows
    assert merge(a, b) == merge(b, a)


@given(st.one_of(pairs(owned_rows(), 3), pairs(shared_rows(), 3)))
def test_merge_is_associative(rows: list[Row]) -> None:
    a, b, c = rows
    assert merge(merge(a, b), c) == merge(a, merge(b, c))


@given(same_row)
def test_merge_is_idempotent(a: Row) -> None:
    assert merge(a, a) == a
    assert not newer(a, a)


@given(owned_rows(), owned_rows())
def test_the_higher_owned_version_wins(a: Row, b: Row) -> None:
    if a.version != b.version:
        assert merge(a, b).version == max(a.version, b.version)


@given(shared_rows(), shared_rows())
def test_the_later_shared_stamp_wins(a: Row, b: Row) -> None:
    if a.stamp != b.stamp:
        assert merge(a, b).stamp == max(a.stamp, b.stamp)


def test_rows_of_different_keys_do_not_merge() -> None:
    a = row("apps", "x", None, "a", 1)
    b = row("apps", "y", None, "a", 1)
    try:
        merge(a, b)
    except ValueError:
        return
    raise AssertionError("merging different keys must fail")


@given(st.lists(shared_rows("app1") | shared_rows("app2"), min_size=1, max_size=12),
       st.randoms(use_true_random=False))
def test_apply_in_any_order_and_any_repetition_gives_the_same_replica(
        rows: list[Row], rng: random.Random) -> None:
    expected = replica("r1")
    expected.apply(rows)
    shuffled = rows + rng.sample(rows, len(rows) // 2)
    rng.shuffle(shuffled)
    other = replica("r2")
    for batch_start in range(0, len(shuffled), 3):
        other.apply(shuffled[batch_start:batch_start + 3])
    assert other.view.all_rows() == expected.view.all_rows()
    # and what it holds is the merge of everything
    for key in ("app1", "app2"):
        versions = [r for r in rows if r.key == key]
        if versions:
            best = versions[0]
            for r in versions[1:]:
                best = merge(best, r)
            assert other.view.get("apps", key) == best
