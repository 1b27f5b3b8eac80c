"""The supermarket model against its closed form (n -> infinity), and the closed form itself.

Tolerance: with n = 500 servers and 60,000 measured jobs after 30,000 of warm-up, the mean
time in system is within 5 % of T_d(load), and the fraction of servers with at least i jobs
within 0.04 of s_i (estimated from one random server per arrival, while the whole system's
load drifts by about 1/sqrt(n) over long stretches at load 0.9). Finite n and a finite run
bias the mean by a few tenths of a percent at this size; 5 % leaves room for that and for the
seed, and is far tighter than the gap the model is about (T_1(0.9) = 10, T_2(0.9) = 2.61).
"""

from __future__ import annotations

import random

import pytest

from bodega.sim.supermarket import (
    SupermarketParams,
    expected_fraction,
    expected_time,
    simulate,
    stationary_queues,
)

TOLERANCE = 0.05
N = 500


def test_the_closed_form_by_hand() -> None:
    # d = 2, load 0.5: 1 + 0.5^2 + 0.5^6 + 0.5^14 + ... = 1.2656...
    assert expected_time(0.5, 2) == pytest.approx(1 + 0.25 + 0.015625 + 0.5**14 + 0.5**30)
    # d = 1 is M/M/1: 1 / (1 - load); and the general sum agrees with it term by term.
    assert expected_time(0.9, 1) == pytest.approx(10.0)
    assert expected_fraction(0.9, 1, 3) == pytest.approx(0.729)
    # d = 2: s_i = load^(2^i - 1): 0.9, 0.729, 0.478...
    assert [expected_fraction(0.9, 2, i) for i in (1, 2, 3)] == pytest.approx(
        [0.9, 0.9**3, 0.9**7])
    assert expected_time(0.9, 2) == pytest.approx(2.6141, abs=1e-4)
    # More choices help less and less: 10 -> 2.61 -> 2.03.
    assert expected_time(0.9, 3) == pytest.approx(2.0279, abs=1e-4)
    with pytest.raises(ValueError, match="load"):
        expected_time(1.0, 2)


@pytest.mark.parametrize(("load", "choices"), [(0.9, 2), (0.9, 3), (0.5, 1), (0.7, 2)])
def test_the_simulation_agrees_with_the_closed_form(load: float, choices: int) -> None:
    result = simulate(SupermarketParams(servers=N, load=load, choices=choices, jobs=60_000,
                                        warmup=30_000, seed=5))
    assert result.mean_time == pytest.approx(expected_time(load, choices), rel=TOLERANCE)
    for seen, expected in zip(result.at_least, result.expected_at_least, strict=True):
        assert seen == pytest.approx(expected, abs=0.04)


def test_two_choices_beat_one_by_far() -> None:
    one = simulate(SupermarketParams(servers=N, load=0.9, choices=1, jobs=40_000,
                                     warmup=20_000, seed=2))
    two = simulate(SupermarketParams(servers=N, load=0.9, choices=2, jobs=40_000,
                                     warmup=20_000, seed=2))
    assert two.mean_time * 2 < one.mean_time


def test_queues_start_from_the_stationary_law() -> None:
    # At time 0 the fraction of servers with at least i jobs is already s_i, for one choice
    # (geometric) and for two (doubly exponential): nothing has to fill from empty.
    for load, choices in ((0.95, 1), (0.9, 2)):
        params = SupermarketParams(servers=20_000, load=load, choices=choices, jobs=1, seed=3)
        lengths = [len(q) for q in stationary_queues(random.Random(3), params)]
        for i in (1, 2, 3, 5):
            seen = sum(n >= i for n in lengths) / len(lengths)
            assert seen == pytest.approx(expected_fraction(load, choices, i), abs=0.01)


def test_the_default_warmup_is_sized_from_the_load() -> None:
    # One choice starts stationary: no warm-up. More choices: ten mean times in system.
    assert SupermarketParams(load=0.99, choices=1).warmup_jobs == 0
    two = SupermarketParams(servers=1000, load=0.9, choices=2)
    assert two.warmup_jobs == pytest.approx(10 * expected_time(0.9, 2) * 0.9 * 1000, abs=1)
    assert SupermarketParams(load=0.5, choices=2).warmup_jobs < two.warmup_jobs
    assert SupermarketParams(choices=1, warmup=7).warmup_jobs == 7


@pytest.mark.parametrize("load", [0.95, 0.98])
def test_one_choice_near_load_one_is_right_with_the_default_warmup(load: float) -> None:
    # M/M/1 relaxes in about 1/(1 - sqrt(load))^2: 1,560 time units at 0.95, 9,900 at 0.98.
    # Empty queues and a fixed warm-up came out far under 1/(1 - load); a stationary start
    # is right from the first job. Many servers, so that the mean of their (independent,
    # slowly moving) queues is close: its error is about T / sqrt(servers), 1.4 % here.
    result = simulate(SupermarketParams(servers=5000, load=load, choices=1, jobs=100_000,
                                        seed=4))
    assert result.mean_time == pytest.approx(expected_time(load, 1), rel=TOLERANCE)
