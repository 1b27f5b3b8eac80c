"""Failed authentications per source address: a token bucket, with the clock passed in."""

from __future__ import annotations

import pytest

from bodega.broker.auth.core.limit import FailureLimiter


def test_an_address_may_fail_a_burst_then_waits_for_the_refill() -> None:
    limiter = FailureLimiter(burst=3, per_second=0.5)
    for _ in range(3):
        assert limiter.retry_after("10.0.0.1", 0.0) is None
        limiter.failed("10.0.0.1", 0.0)
    assert limiter.retry_after("10.0.0.1", 0.0) == pytest.approx(2.0)  # one back in 2 s
    assert limiter.retry_after("10.0.0.1", 1.5) == pytest.approx(0.5)
    assert limiter.retry_after("10.0.0.1", 2.0) is None
    limiter.failed("10.0.0.1", 2.0)
    assert limiter.retry_after("10.0.0.1", 2.0) == pytest.approx(2.0)


def test_one_address_failing_leaves_every_other_alone() -> None:
    limiter = FailureLimiter(burst=2, per_second=0.1)
    for _ in range(50):
        limiter.failed("10.0.0.1", 0.0)
    assert limiter.retry_after("10.0.0.1", 0.0) is not None
    assert limiter.retry_after("10.0.0.2", 0.0) is None


def test_an_address_that_never_fails_is_never_remembered() -> None:
    limiter = FailureLimiter(burst=2, per_second=1.0)
    for t in range(100):
        assert limiter.retry_after("10.0.0.9", float(t)) is None
    assert len(limiter) == 0


def test_a_bucket_back_to_full_is_forgotten_and_memory_is_bounded() -> None:
    limiter = FailureLimiter(burst=2, per_second=1.0, addresses=3)
    limiter.failed("a", 0.0)
    assert len(limiter) == 1
    assert limiter.retry_after("a", 10.0) is None
    assert len(limiter) == 0  # refilled: nothing left to remember
    for address in ("a", "b", "c", "d"):  # a spray of sources: the fullest goes first
        limiter.failed(address, 0.0)
        if address == "a":
            limiter.failed(address, 0.0)
    assert len(limiter) == 3
    assert limiter.retry_after("a", 0.0) is not None  # the emptiest was kept
