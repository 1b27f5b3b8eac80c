"""The Fly-like workload generator: deterministic, diurnal, heavy-tailed, bursty."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from pydantic import ValidationError

from bodega.sim.workload import DAY, WorkloadParams, generate

PARAMS = WorkloadParams(hours=24, apps=200, rate=0.05, seed=4)


def test_the_same_parameters_give_the_same_trace() -> None:
    assert generate(PARAMS) == generate(PARAMS)
    assert generate(PARAMS) != generate(PARAMS.model_copy(update={"seed": 5}))


def test_arrivals_follow_the_day() -> None:
    steady = generate(PARAMS.model_copy(update={"burst_rate": 0.0}))
    # rate(t) = rate * (1 + 0.6 sin(2 pi t / day)): the first half-day carries
    # (1 + 0.6 * 2/pi) / (1 - 0.6 * 2/pi) = 2.3 times the creates of the second.
    first = sum(1 for a in steady.arrivals if a.time < DAY / 2)
    second = len(steady.arrivals) - first
    assert first / second == pytest.approx((1 + 1.2 / math.pi) / (1 - 1.2 / math.pi), rel=0.15)
    assert len(steady.arrivals) == pytest.approx(0.05 * DAY, rel=0.05)


def test_many_small_apps_and_a_heavy_tail_of_sizes() -> None:
    trace = generate(PARAMS)
    memory = sorted(a.memory_mb for a in trace.arrivals)
    assert memory[len(memory) // 2] <= 1024  # the median machine is small
    assert memory[-1] >= 16 * memory[len(memory) // 2]  # and the biggest are far bigger
    per_app = Counter(a.app for a in trace.arrivals)
    top = per_app.most_common(1)[0][1]
    assert top > 20 * sorted(per_app.values())[len(per_app) // 2]  # Zipf: a few busy apps


def test_scale_from_zero_bursts_arrive_together() -> None:
    quiet = PARAMS.model_copy(update={"rate": 1e-9, "burst_rate": 1 / 3600, "burst_min": 5,
                                      "burst_max": 5, "burst_window": 10})
    trace = generate(quiet)
    assert len(trace.arrivals) >= 5
    assert len(trace.arrivals) % 5 == 0
    first = trace.arrivals[:5]
    assert len({a.app for a in first}) == 1
    assert first[-1].time - first[0].time <= 10


def test_parameters_are_checked() -> None:
    with pytest.raises(ValidationError):
        WorkloadParams(diurnal=1.5)
    with pytest.raises(ValidationError):
        WorkloadParams.model_validate({"apps": 10, "burstiness": 2})
