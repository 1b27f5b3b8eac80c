"""A worker's wall clock never runs backwards, whatever the host's clock does."""

from __future__ import annotations

from dataclasses import dataclass

from bodega.runtime.steady_clock import MOST_AHEAD, SLEW, SteadyClock


@dataclass
class Host:
    wall: float = 1_000.0
    mono: float = 50.0

    def clock(self, floor: float = 0.0) -> SteadyClock:
        return SteadyClock(floor, wall=lambda: self.wall, monotonic=lambda: self.mono)

    def run(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def test_it_is_the_wall_clock_while_that_runs_forward() -> None:
    host = Host()
    clock = host.clock()
    seen = []
    for _ in range(3):
        seen.append(clock())
        host.run(2.5)
    assert seen == [1_000.0, 1_002.5, 1_005.0]


def test_a_forward_step_is_taken_at_once() -> None:
    host = Host()
    clock = host.clock()
    clock()
    host.wall += 120
    assert clock() == 1_120.0


def test_after_a_backward_step_it_never_answers_less_and_slews_until_caught_up() -> None:
    host = Host()
    clock = host.clock()
    host.run(10)
    assert clock() == 1_010.0
    host.wall -= 90  # NTP steps the clock back
    assert clock() == 1_010.0
    host.run(10)
    assert clock() == 1_010.0 + SLEW * 10  # ahead of the wall clock, running slower
    # The gap of 90 s closes at (1 - SLEW) s a second: 180 s at half speed.
    host.run(170)
    assert clock() == 1_010.0 + SLEW * 180
    host.run(20)
    assert clock() == host.wall  # caught up: the wall clock again
    host.run(5)
    assert clock() == host.wall


def test_it_starts_no_earlier_than_its_floor() -> None:
    host = Host()
    clock = host.clock(floor=1_300.0)  # its store recorded a time ahead of the wall clock
    assert clock() == 1_300.0
    host.run(4)
    assert clock() == 1_300.0 + SLEW * 4
    assert host.clock(floor=900.0)() == host.wall  # a floor behind the wall clock is no matter


def test_a_step_back_of_years_is_followed_to_within_its_most_ahead() -> None:
    host = Host(wall=2_000_000_000.0)  # booted with its clock years ahead
    clock = host.clock()
    clock()
    host.wall = 1_000.0  # then set right
    assert clock() == 1_000.0 + MOST_AHEAD
    host.run(2 * MOST_AHEAD)
    assert clock() == host.wall  # caught up at last
    # A store stamped with those years does not hold a restarted clock there either.
    assert host.clock(floor=2_000_000_000.0)() == host.wall + MOST_AHEAD
