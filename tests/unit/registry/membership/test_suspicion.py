"""Lifeguard's suspicion timeout and local health multiplier, by the numbers."""

from __future__ import annotations

import math

import pytest

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.suspicion import (
    LocalHealth,
    Suspicion,
    suspicion_max,
    suspicion_min,
    suspicion_timeout,
)

LAN = SwimConfig()


@pytest.mark.parametrize(("n", "expected"), [(1, 4.0), (3, 4.0), (10, 4.0), (100, 8.0),
                                             (1000, 12.0), (200, 4 * math.log10(200))])
def test_min_is_mult_times_log10_n_probe_intervals(n: int, expected: float) -> None:
    assert suspicion_min(LAN, n) == pytest.approx(expected)
    assert suspicion_max(LAN, n) == pytest.approx(6 * expected)


def test_timeout_falls_from_max_to_min_with_log_of_confirmations() -> None:
    # K = SuspicionMult - 2 = 2: Max with none, Min once two others agree.
    assert suspicion_timeout(4, 24, 2, 0) == 24
    assert suspicion_timeout(4, 24, 2, 1) == pytest.approx(24 - 20 * math.log(2) / math.log(3))
    assert suspicion_timeout(4, 24, 2, 2) == 4
    assert suspicion_timeout(4, 24, 2, 5) == 4  # never below Min
    assert suspicion_timeout(4, 24, 0, 0) == 4  # nobody expected to confirm: Min at once


def test_a_suspicion_counts_each_independent_confirmer_once() -> None:
    s = Suspicion.start(LAN, now=100.0, n=10, incarnation=3, by="b")
    assert (s.k, s.deadline) == (2, 124.0)
    assert not s.confirm("b")  # whoever raised it is not a confirmation
    assert s.confirm("c")
    assert not s.confirm("c")
    assert s.deadline == pytest.approx(100 + 24 - 20 * math.log(2) / math.log(3))
    assert s.confirm("d")
    assert s.deadline == 104.0
    assert not s.confirm("e")  # K reached: more confirmations change nothing


def test_small_clusters_expect_no_confirmations() -> None:
    # n - 2 < K: besides the suspect and us there are too few members to agree.
    s = Suspicion.start(LAN, now=0.0, n=3, incarnation=0, by="b")
    assert (s.k, s.deadline) == (0, 4.0)


def test_local_health_saturates_between_zero_and_max_and_scales_timeouts() -> None:
    health = LocalHealth(LAN.max_health_score)
    health.apply(-1)
    assert health.score == 0
    health.apply(3)
    assert health.scale(0.5) == 2.0
    health.apply(100)
    assert health.score == 7
    assert health.scale(1.0) == 8.0  # memberlist's cap: 1 s probes back off to 8 s


@pytest.mark.parametrize(("n", "limit"), [(1, 4), (9, 4), (10, 8), (100, 12), (200, 12)])
def test_retransmit_limit_is_four_ceil_log10_n_plus_one(n: int, limit: int) -> None:
    assert LAN.retransmit_limit(n) == limit


@pytest.mark.parametrize(("n", "period"), [(10, 10.0), (32, 10.0), (33, 20.0), (64, 20.0),
                                           (200, 40.0)])
def test_push_pull_stretches_by_log2_beyond_32_members(n: int, period: float) -> None:
    assert LAN.push_pull_period(n) == period
