"""A capacity bar's geometry: each segment its share, end to end, exactly the bar's width."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.broker.ui.core.bars import BAR_WIDTH, Part, bar


def test_each_machine_gets_its_share_then_reserved_then_free() -> None:
    b = bar(4000, [Part("m1", "a/one", "started", 1000), Part("m2", "a/two", "starting", 250)],
            reserved=250)
    assert [(s.key, s.kind) for s in b.segments] == [
        ("m1", "started"), ("m2", "starting"), ("reserved", "reserved"), ("free", "free")]
    widths = {s.key: s.width for s in b.segments}
    assert widths == {"m1": BAR_WIDTH / 4, "m2": BAR_WIDTH / 16, "reserved": BAR_WIDTH / 16,
                      "free": BAR_WIDTH * 10 / 16}
    assert (b.allocated, b.reserved, b.free, b.over) == (1250, 250, 2500, False)


def test_nothing_to_show_is_all_free_and_a_zero_total_draws_nothing() -> None:
    assert [(s.kind, s.width) for s in bar(1000, []).segments] == [("free", BAR_WIDTH)]
    assert bar(0, []).segments == ()


def test_parts_over_the_total_are_scaled_to_fit_and_flagged() -> None:
    b = bar(1000, [Part("m1", "", "started", 1000), Part("m2", "", "started", 1000)])
    assert b.over
    assert [s.width for s in b.segments] == [BAR_WIDTH / 2, BAR_WIDTH / 2]
    assert b.free == 0


def test_negative_reserved_and_empty_parts_draw_nothing() -> None:
    b = bar(1000, [Part("m1", "", "started", 0), Part("m2", "", "started", 500)], reserved=-30)
    assert [s.key for s in b.segments] == ["m2", "free"]
    assert b.reserved == 0


amounts = st.lists(st.integers(min_value=0, max_value=64_000), max_size=40)


@given(total=st.integers(min_value=1, max_value=256_000), sizes=amounts,
       reserved=st.integers(min_value=-1000, max_value=64_000))
def test_segments_tile_the_bar_and_match_their_shares(total: int, sizes: list[int],
                                                      reserved: int) -> None:
    parts = [Part(f"m{i}", "", "started", n) for i, n in enumerate(sizes)]
    b = bar(total, parts, reserved)
    edge = 0.0
    for segment in b.segments:
        assert segment.x == pytest.approx(edge, abs=1e-3)  # no gap, no overlap
        edge = segment.x + segment.width
    assert edge == pytest.approx(BAR_WIDTH, abs=1e-3)  # exactly the bar, never past it
    drawn = max(total, sum(sizes) + max(0, reserved))
    for segment in b.segments:  # every segment is its share, within the rounding
        assert segment.width == pytest.approx(segment.amount * BAR_WIDTH / drawn, abs=2e-3)
