"""The hybrid logical clock: stamps only rise, whatever the wall clock and peers do."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.registry.replication.core.hlc import ClockDrift, HybridClock, Stamp


class Wall:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


# A run is a mix of wall-clock moves (forward or back) and remote stamps observed.
steps = st.lists(st.one_of(
    st.tuples(st.just("wall"), st.integers(-5_000, 5_000)),
    st.tuples(st.just("tick"), st.just(0)),
    st.tuples(st.just("observe"), st.tuples(st.integers(-5_000, 5_000), st.integers(0, 50))),
), max_size=80)


@given(steps)
def test_ticks_strictly_rise_and_follow_everything_observed(run: list[tuple[str, object]]) -> None:
    wall = Wall(1_000_000)
    clock = HybridClock("a", wall)
    last = clock.tick()
    highest_seen = last
    for kind, arg in run:
        if kind == "wall":
            assert isinstance(arg, int)
            wall.ms += arg
        elif kind == "observe":
            assert isinstance(arg, tuple)
            offset, logical = arg
            remote = Stamp(wall.ms + offset, logical, "b")
            clock.check(remote)
            clock.observe(remote)
            highest_seen = max(highest_seen, remote)
        else:
            stamp = clock.tick()
            assert (stamp.wall_ms, stamp.logical) > (last.wall_ms, last.logical)
            assert (stamp.wall_ms, stamp.logical) > (highest_seen.wall_ms, highest_seen.logical)
            assert stamp.wall_ms >= wall.ms  # never behind our own wall clock
            last = highest_seen = stamp


def test_a_clock_that_steps_back_keeps_counting_from_where_it_was() -> None:
    wall = Wall(10_000)
    clock = HybridClock("a", wall)
    assert clock.tick() == Stamp(10_000, 0, "a")
    wall.ms = 9_000
    assert clock.tick() == Stamp(10_000, 1, "a")
    wall.ms = 10_001
    assert clock.tick() == Stamp(10_001, 0, "a")


def test_a_restored_clock_continues_above_its_saved_stamp() -> None:
    clock = HybridClock("a", Wall(5), wall_ms=100, logical=7)
    assert clock.tick() == Stamp(100, 8, "a")


def test_a_stamp_from_far_in_the_future_is_refused() -> None:
    clock = HybridClock("a", Wall(0), max_drift_ms=1_000)
    clock.check(Stamp(1_000, 0, "b"))
    with pytest.raises(ClockDrift):
        clock.check(Stamp(1_001, 0, "b"))


def test_stamps_order_by_wall_then_counter_then_node() -> None:
    assert Stamp(1, 9, "z") < Stamp(2, 0, "a") < Stamp(2, 1, "a") < Stamp(2, 1, "b")
