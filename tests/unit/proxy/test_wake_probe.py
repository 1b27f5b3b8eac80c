"""How often the proxy connects to a machine it started, until its port accepts."""

from __future__ import annotations

import pytest

from bodega.proxy.wake import PROBE_CAP, PROBE_INTERVAL, probe_delay


def test_a_start_is_probed_every_millisecond_at_first() -> None:
    assert probe_delay(0.0) == PROBE_INTERVAL
    assert probe_delay(0.04) == PROBE_INTERVAL


@pytest.mark.parametrize("waited", [0.1, 0.15, 0.2])
def test_a_slow_start_is_probed_less_often_and_noticed_at_most_2_percent_late(
        waited: float) -> None:
    delay = probe_delay(waited)
    assert PROBE_INTERVAL < delay <= waited * 0.02


def test_the_wait_between_probes_is_capped() -> None:
    assert probe_delay(10.0) == PROBE_CAP
    assert probe_delay(30.0) == PROBE_CAP
