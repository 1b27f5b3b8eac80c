"""The supermarket model against its closed form (n -> infinity), and the closed form itself.

Tolerance: with n = 500 servers and 60,000 measured jobs after 30,000 of warm-up, the mean
time in system is within 5 % of T_d(load), and the fraction of servers with at least i jobs
within 0.04 of s_i (estimated from one random server per arrival, while the whole system's
load drifts by about 1/sqrt(n) over long stretches at load 0.9). Finite n and a finite run
bias the mean by a few tenths of a percent at this size; 5 % leaves room for that and for the
seed, and is far tighter than the gap the model is about (T_1(0.9) = 10, T_2(0.9) = 2.61).
"""

from __future__ import annotations

import math
import random

import pytest

from bodega.sim.supermarket import (
    MAX_JOBS,
    MIN_JOBS,
    RunLength,
    SupermarketParams,
    busy_error,
    busy_fraction_off,
    busy_tolerance,
    default_run,
    expected_fraction,
    expected_time,
    mean_time_error,
    relaxation_time,
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


def test_the_relaxation_time_is_the_slope_of_the_jobs_per_server() -> None:
    # One choice: m = load / (1 - load), so tau = 1 / (1 - load)^2, the M/M/1's scale.
    assert relaxation_time(0.9, 1) == pytest.approx(100.0)
    # Two choices: d/dload of load + load^3 + load^7 + ... = 1 + 3 load^2 + 7 load^6 + ...
    assert relaxation_time(0.5, 2) == pytest.approx(
        sum((2**i - 1) * 0.5 ** (2**i - 2) for i in range(1, 8)))
    for load in (0.9, 0.95, 0.99):  # about 1.3 / (1 - load): far shorter than one choice's
        assert 1.1 < relaxation_time(load, 2) * (1 - load) < 1.5


def test_the_default_run_grows_with_the_load_within_its_floor_and_cap() -> None:
    runs = {load: default_run(load, 2, 1000) for load in (0.5, 0.9, 0.95, 0.98, 0.99)}
    assert runs[0.5].jobs == MIN_JOBS  # far from saturation the floor is plenty
    # Enough jobs for 1 % on the mean: (tau / T_d)^2 2 / 0.01^2, about 1/(1 - load)^2.
    assert runs[0.95].jobs == pytest.approx(
        2 * (relaxation_time(0.95, 2) / expected_time(0.95, 2) / 0.01) ** 2, abs=1000)
    assert runs[0.9].jobs < runs[0.95].jobs < runs[0.98].jobs
    assert runs[0.98].jobs == runs[0.99].jobs == MAX_JOBS  # near 1: capped, and said so
    assert mean_time_error(0.95, 2, 1000, runs[0.95].jobs) == pytest.approx(0.01, rel=0.01)
    assert mean_time_error(0.99, 2, 1000, MAX_JOBS) == pytest.approx(0.018, abs=0.001)
    # The warm-up: three relaxation times of arrivals (ten mean times at low load).
    assert runs[0.95].warmup == pytest.approx(3 * relaxation_time(0.95, 2) * 0.95 * 1000, abs=1)
    assert runs[0.5].warmup == pytest.approx(10 * expected_time(0.5, 2) * 0.5 * 1000, abs=1)
    assert default_run(0.95, 2, 100).warmup < runs[0.95].warmup  # arrivals scale with n


def test_one_choice_starts_stationary_and_needs_jobs_only_for_few_servers() -> None:
    assert default_run(0.99, 1, 1000).warmup == 0
    assert default_run(0.9, 1, 1000).jobs > 10 * MIN_JOBS
    # 20,000 stationary queues already average within 1 % at time 0.
    assert default_run(0.9, 1, 20_000).jobs == MIN_JOBS
    assert mean_time_error(0.99, 1, 1000, MAX_JOBS) == pytest.approx(1 / math.sqrt(990))


def test_given_jobs_and_warmup_win_over_the_defaults() -> None:
    assert SupermarketParams(load=0.95, jobs=5, warmup=7).run == RunLength(warmup=7, jobs=5)
    only_jobs = SupermarketParams(load=0.95, jobs=5).run
    assert only_jobs == RunLength(warmup=default_run(0.95, 2, 1000).warmup, jobs=5)


def test_a_busy_fraction_off_the_load_by_more_than_a_long_runs_noise_is_flagged() -> None:
    # The default run at 0.95 (1,149,000 jobs): sqrt(0.95 * 1.95 / J) = 0.00127, times 3.
    params = SupermarketParams(load=0.95, choices=2)
    assert busy_error(0.95, params.run.jobs) == pytest.approx(0.00127, abs=1e-5)
    assert busy_tolerance(params) == pytest.approx(0.0038, abs=1e-4)
    assert not busy_fraction_off(0.9535, params)
    assert busy_fraction_off(0.957, params)  # 200,000 jobs gave this: the mean 6.6 % high
    assert busy_fraction_off(0.9455, params)  # low as well as high
    # A short run is held to the default's tolerance, not excused by its own wider noise...
    short = SupermarketParams(load=0.95, choices=2, jobs=20_000)
    assert busy_tolerance(short) == busy_tolerance(params)
    assert busy_fraction_off(0.957, short)
    # ... and a longer run to its own.
    long = SupermarketParams(load=0.95, choices=2, jobs=10 * params.run.jobs)
    assert busy_tolerance(long) < busy_tolerance(params)
    assert busy_fraction_off(0.9535, long)


@pytest.mark.parametrize("load", [0.95, 0.98])
def test_one_choice_near_load_one_is_right_with_the_default_warmup(load: float) -> None:
    # M/M/1 relaxes in about 1/(1 - sqrt(load))^2: 1,560 time units at 0.95, 9,900 at 0.98.
    # Empty queues and a fixed warm-up came out far under 1/(1 - load); a stationary start
    # is right from the first job. Many servers, so that the mean of their (independent,
    # slowly moving) queues is close: its error is about T / sqrt(servers), 1.4 % here.
    result = simulate(SupermarketParams(servers=5000, load=load, choices=1, jobs=100_000,
                                        seed=4))
    assert result.mean_time == pytest.approx(expected_time(load, 1), rel=TOLERANCE)
