"""Measures worked out by hand on a two-sample run, and the comparison's outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bodega.sim.compare import CompareSpec, compare, sweep_table, table
from bodega.sim.engine import RunResult, Sample, SimConfig
from bodega.sim.fleet import FleetSpec, HostShape, RegionSpec
from bodega.sim.measures import measure
from bodega.sim.workload import WorkloadParams


def test_measures_by_hand() -> None:
    result = RunResult("hand", SimConfig(), ["a", "b", "c", "d"], creates=10, placed=8,
                       rejected=2, rejected_with_room=1, refusals=3,
                       decision_seconds=[0.001, 0.003])
    result.samples = [
        Sample(0.0, np.array([0.5, 0.5, 0.5, 0.5]), np.array([1, 1, 1, 1]),
               np.array([1, 0, 1, 0])),
        Sample(60.0, np.array([1.0, 0.95, 0.25, 0.2]), np.array([6, 5, 1, 0]),
               np.array([6, 5, 1, 0])),
    ]
    m = measure(result)
    assert m.rejection_rate == pytest.approx(0.2)
    assert m.max_utilization == 1.0
    # Eight values; the 99th percentile interpolates between 0.95 and 1.0 (numpy's linear):
    # rank 0.99 * 7 = 6.93 -> 0.95 + 0.93 * 0.05.
    assert m.p99_utilization == pytest.approx(0.9965)
    # Per sample: 0.5, then 0.95 + 0.97 * 0.05 (rank 2.97 of 0..3); averaged.
    assert m.p99_over_time == pytest.approx((0.5 + 0.9985) / 2)
    assert m.hosts_above_90 == pytest.approx(1.0)  # none, then two: one per sample on average
    # CV: 0 for the even sample; the second has mean 0.6 and std 0.3674: 0.6124; averaged.
    assert m.cv == pytest.approx(np.std([1.0, 0.95, 0.25, 0.2]) / 0.6 / 2)
    assert (m.death_mean, m.death_max) == (2.0, 6)
    assert m.death_p99 == pytest.approx(5.93)  # between 5 and 6 at rank 6.93 of 0..7
    assert m.death_unprotected == pytest.approx(14 / 8)
    assert m.decision_us == pytest.approx(2000.0)


def test_a_small_comparison_fills_its_table_and_sweeps(tmp_path: Path) -> None:
    small = FleetSpec(regions=(RegionSpec(name="ams", hosts=(
        HostShape(cpus=8, memory_mb=16384, count=3),)),))
    spec = CompareSpec(policies=("utility", "binpack"), fleet=small,
                       workload=WorkloadParams(hours=0.2, apps=20, rate=0.3,
                                               regions=("ams",), seed=2),
                       loads=(1.0, 3.0), delays=(0.0, 30.0), broker_counts=(1, 4),
                       sweep_hours=0.1, config=SimConfig(sample_every=60))
    lines: list[str] = []
    comparison = compare(spec, progress=lines.append)
    assert [m.policy for m in comparison.measures] == ["utility", "binpack"]
    text = table(comparison.measures)
    assert text.count("\n") == 3
    assert text.splitlines()[0].count("|") == 12
    assert text.splitlines()[2].startswith("| utility | ")
    loads = comparison.by_load["binpack"]
    assert [x for x, _ in loads] == [1.0, 3.0]
    assert loads[1][1].creates > loads[0][1].creates  # three times the load, more creates
    assert "delay s 30" in sweep_table("delay s", comparison.by_delay)
    assert any("brokers 4" in line for line in lines)

    from bodega.sim.plots import draw

    written = draw(comparison, tmp_path / "plots")
    assert {p.name for p in written} == {"utilization-over-time.png", "utilization-cdf.png",
                                        "rejections-vs-load.png",
                                        "refusals-vs-staleness.png"}
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)
