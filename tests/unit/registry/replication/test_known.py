"""Per-origin version bookkeeping and the anti-entropy need, checked against plain sets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.registry.replication.core.known import EMPTY, MAX_GAPS, Known, need

TOP = 60

ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, TOP), st.just(0)),
    st.tuples(st.just("span"), st.integers(1, TOP), st.integers(0, 8)),
    st.tuples(st.just("expect"), st.integers(1, TOP), st.just(0)),
), max_size=40)


def build(run: list[tuple[str, int, int]]) -> tuple[Known, set[int], int]:
    """Apply ``run`` to a Known and to a model: the seen set and the top."""
    known, seen, top = EMPTY, set[int](), 0
    for kind, a, b in run:
        if kind == "add":
            known, top = known.add(a), max(top, a)
            seen.add(a)
        elif kind == "span":
            known, top = known.add_span(a, a + b), max(top, a + b)
            seen |= set(range(a, a + b + 1))
        else:
            known, top = known.expect(a), max(top, a)
    return known, seen, top


def members(known: Known) -> set[int]:
    return {v for lo, hi in known.spans() for v in range(lo, hi + 1)}


@given(ops)
def test_known_is_exactly_the_versions_seen(run: list[tuple[str, int, int]]) -> None:
    known, seen, top = build(run)
    assert known.top == top
    assert members(known) == seen
    assert known.missing == top - len(seen)
    assert all((v in known) == (v in seen) for v in range(0, top + 3))
    assert Known.from_json(known.to_json()) == known


@given(ops, ops)
def test_need_is_what_one_side_saw_and_the_other_did_not(
        theirs_run: list[tuple[str, int, int]], mine_run: list[tuple[str, int, int]]) -> None:
    theirs, _, _ = build(theirs_run)
    mine, _, _ = build(mine_run)
    spans = need(theirs, mine)
    wanted = {v for lo, hi in spans for v in range(lo, hi + 1)}
    assert wanted == members(mine) - members(theirs)
    assert spans == sorted(spans)
    # after receiving what is needed, the requester has seen everything we had
    assert members(theirs.add_spans(spans)) >= members(mine)


@given(ops)
def test_covers_agrees_with_membership(run: list[tuple[str, int, int]]) -> None:
    known, seen, _ = build(run)
    for lo in range(1, 12):
        for hi in range(lo, lo + 6):
            assert known.covers(lo, hi) == (set(range(lo, hi + 1)) <= seen)


def test_too_many_gaps_forget_seen_versions_rather_than_grow() -> None:
    known = EMPTY
    for v in range(2, 4 * MAX_GAPS, 2):  # every other version: a gap at each odd one
        known = known.add(v)
    assert len(known.gaps) <= MAX_GAPS
    assert members(known) <= set(range(2, 4 * MAX_GAPS, 2))  # nothing unseen became seen
    assert known.top == 4 * MAX_GAPS - 2


def test_malformed_known_is_refused() -> None:
    for bad in ([], [-1], ["3"], [5, [[3, 2]]], [5, [[4, 6]]], [5, [[1, 2], [3, 4]]], [True]):
        with pytest.raises(ValueError, match=r"gaps|top|version|known"):
            Known.from_json(bad)


def test_a_notice_opens_a_gap_up_to_the_version() -> None:
    known = EMPTY.add_span(1, 4).expect(7)
    assert known.top == 7
    assert known.gaps == ((5, 7),)
    assert need(known, EMPTY.add_span(1, 9)) == [(5, 9)]
