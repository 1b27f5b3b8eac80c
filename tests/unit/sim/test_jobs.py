"""The batch-scheduler simulator: Sparrow's ordering of its schedulers, and its arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bodega.cli.main import app
from bodega.sim.jobs import SCHEDULERS, JobSimParams, simulate, sweep

SMALL = JobSimParams(workers=200, jobs=300, warmup=60, load=0.8, seed=4)


def test_one_job_on_an_empty_cluster_takes_its_longest_task_plus_the_messages() -> None:
    params = JobSimParams(workers=50, jobs=1, warmup=0, tasks_min=5, tasks_max=5,
                          load=0.01, delay=0.01, seed=2)
    ideal = simulate(params, "omniscient").median
    # Three messages before a task starts (a reservation, the ask, the task; or a probe, its
    # answer, the task) and nothing else waits on an empty cluster. A claim's answer is one
    # message after the home has the job (a claim already on its way), or up to a poll and a
    # round trip later (claimants ask only every poll).
    assert simulate(params, "late-binding").median == pytest.approx(ideal + 0.03)
    assert simulate(params, "batch").median == pytest.approx(ideal + 0.03)
    assert ideal + 0.01 <= simulate(params, "claim").median <= ideal + 0.02 + params.poll


def test_the_ideal_is_best_and_late_binding_beats_sampling_at_load() -> None:
    results = {s: simulate(SMALL, s) for s in SCHEDULERS}
    ideal = results["omniscient"].median
    assert all(r.median >= ideal * 0.999 for r in results.values())
    assert results["late-binding"].median < results["batch"].median \
        < results["per-task"].median
    assert results["late-binding"].median < 1.25 * ideal


def test_more_probes_help_sampling_and_one_probe_per_task_is_random_placement() -> None:
    one = simulate(SMALL.model_copy(update={"d": 1.0}), "batch").median
    two = simulate(SMALL.model_copy(update={"d": 2.0}), "batch").median
    assert two < one


def test_the_same_seed_gives_the_same_answer_and_the_sweep_pairs_each_with_its_ideal() -> None:
    assert simulate(SMALL, "claim") == simulate(SMALL, "claim")
    rows = sweep(SMALL, loads=(0.5,), ds=(1.0, 2.0))
    assert len(rows) == 3 * 2 + 2
    assert {ideal.scheduler for _, _, ideal in rows} == {"omniscient"}


def test_the_cli_prints_a_row_per_scheduler_and_d_and_refuses_a_bad_load_in_one_line() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["sim", "jobs", "--workers", "100", "--jobs", "100",
                                 "--loads", "0.8", "--d", "1,2"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 1 + 3 * 2 + 2
    assert lines[-1].split()[1:3] == ["omniscient", "-"]
    assert lines[-1].split()[-2:] == ["1.000", "1.000"]
    bad = runner.invoke(app, ["sim", "jobs", "--loads", "1.2"])
    assert bad.exit_code == 1
    assert bad.output.strip() == "Error: load: Input should be less than 1"


def test_the_cli_draws_the_ratios_against_d_when_asked(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["sim", "jobs", "--workers", "100", "--jobs", "100",
                                      "--loads", "0.8,0.9", "--d", "1,2",
                                      "--plots", str(tmp_path / "plots")])
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert written == ["jobs-median-vs-d.png", "jobs-p99-vs-d.png"]
    for name in written:  # a PNG with something in it, not an empty file
        assert (tmp_path / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (tmp_path / "plots" / name).stat().st_size > 10_000
    assert result.output.splitlines()[-1].startswith("wrote ")
