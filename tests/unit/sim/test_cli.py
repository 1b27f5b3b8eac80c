"""``bodega sim`` from the command line: its output, and one readable line on bad input."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from bodega.cli.main import app
from bodega.placement.named import DEFAULT_POLICY

runner = CliRunner()


def test_supermarket_prints_the_mean_time_and_the_closed_form() -> None:
    result = runner.invoke(app, ["sim", "supermarket", "--servers", "200", "--load", "0.7",
                                 "--choices", "2", "--jobs", "20000", "--seed", "3"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("run: 2,261 warm-up jobs (default), then 20,000 measured "
                               "(given): about ±")
    assert lines[1].startswith("mean time in system: 1.")
    assert "closed form for n -> infinity: 1.6145" in lines[1]
    assert lines[3].startswith("busy fraction: 0.")


def printed(pattern: str, output: str) -> float:
    """The number the pattern's group finds in the output."""
    found = re.search(pattern, output)
    assert found is not None, output
    return float(found[1])


GAP = r"closed form for n -> infinity: [0-9.]+, ([-+][0-9.]+) %"  # the mean's, in %
ERROR = r"about ±([0-9.]+) % on the mean"  # the run's expected error, in %


def test_the_default_run_near_saturation_is_long_enough_for_the_closed_form() -> None:
    # bodega sim supermarket --servers 1000 --load 0.95 --choices 2 --seed 7 measured 200,000
    # jobs after 32,139 and came out 6.6 % high, its busy fraction 0.957. The default run now
    # measures enough for ±1 % (1,149,000 jobs after 73,075). 2.5 %: the finite system's bias
    # over the n -> infinity closed form (+0.5 % at 1,000 servers: ten seeds gave +0.55 % on
    # average, 1.05 % apart, 2.06 % at most) and two standard errors.
    result = runner.invoke(app, ["sim", "supermarket", "--servers", "1000", "--load", "0.95",
                                 "--choices", "2", "--seed", "7"])
    assert result.exit_code == 0, result.output
    assert abs(printed(GAP, result.output)) < 2.5, result.output
    assert "run: 73,075 warm-up jobs (default), then 1,149,000 measured (default)" in (
        result.output)
    assert printed(ERROR, result.output) == 1.0
    assert "Warning" not in result.output


def test_a_run_too_short_to_average_out_says_so() -> None:
    # The old default length, 200,000 jobs: its busy fraction strays, and the mean with it.
    result = runner.invoke(app, ["sim", "supermarket", "--servers", "1000", "--load", "0.95",
                                 "--choices", "2", "--seed", "7", "--jobs", "200000"])
    assert result.exit_code == 0, result.output
    assert printed(GAP, result.output) > 2.5
    assert printed(ERROR, result.output) == 2.4
    assert "busy fraction: 0.958" in result.stdout
    assert result.stderr.splitlines() == [
        "Warning: the busy fraction is +0.0085 off the load, more than ±0.0038: the run is "
        "too short for the queues to average out, so the mean time in system is off too; "
        "raise --jobs and --warmup"]


def test_bad_input_is_one_line() -> None:
    result = runner.invoke(app, ["sim", "supermarket", "--load", "1.5"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == ["Error: load: Input should be less than 1"]
    result = runner.invoke(app, ["sim", "compare", "--out", "x", "--policies", "katamari"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: unknown policy 'katamari'")
    assert len(result.output.strip().splitlines()) == 1


def test_compare_replays_a_google_trace(tmp_path: Path) -> None:
    sample = Path(__file__).parent / "data" / "task_events_sample.csv"
    out = tmp_path / "out"
    result = runner.invoke(app, ["sim", "compare", "--out", str(out), "--trace", str(sample),
                                 "--policies", "utility,spread", "--no-sweeps",
                                 "--warmup", "0"])
    assert result.exit_code == 0, result.output
    table = (out / "table.md").read_text()
    assert "task_events_sample.csv, 5 creates" in table
    assert "| spread | 0 (0.00 %)" in table
    assert (out / "utilization-cdf.png").exists()
    # Measured after the whole trace: nothing sampled, still a table and plots, no error.
    late = runner.invoke(app, ["sim", "compare", "--out", str(tmp_path / "late"), "--trace",
                               str(sample), "--policies", "utility", "--no-sweeps",
                               "--warmup", "86400"])
    assert late.exit_code == 0, late.output
    assert (tmp_path / "late" / "utilization-cdf.png").exists()


def test_compare_names_the_brokers_default_and_takes_weights_in_brackets(
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["sim", "compare", "--out", str(out), "--hours", "2",
                                 "--warmup", "0", "--no-sweeps", "--failure-rate", "2",
                                 "--policies", "default,fgd[fragmentation=2;app=0.5],spread"])
    assert result.exit_code == 0, result.output
    table = (out / "table.md").read_text()
    assert f"| default ({DEFAULT_POLICY}) |" in table
    assert "| fgd[fragmentation=2;app=0.5] |" in table
    assert "Host deaths and creates:" in table
    # At two deaths per host per day, two hours of 68 hosts see some; every policy the same.
    deaths = [line.split("|")[2].strip() for line in table.splitlines()
              if line.startswith("| ") and "host deaths" not in line and "---" not in line
              and line.count("|") == 9]
    assert len(set(deaths)) == 1
    assert int(deaths[0]) > 0


def test_compare_replays_a_google_cell_with_its_machine_events(tmp_path: Path) -> None:
    data = Path(__file__).parent / "data"
    out = tmp_path / "out"
    result = runner.invoke(app, ["sim", "compare", "--out", str(out), "--trace",
                                 str(data / "task_events_sample.csv"), "--machine-events",
                                 str(data / "machine_events_sample.csv"), "--policies",
                                 "spread", "--no-sweeps", "--warmup", "0"])
    assert result.exit_code == 0, result.output
    assert "| spread | 2 | 1 | 0 (0) | 1 (0) |" in (out / "table.md").read_text()
    alone = runner.invoke(app, ["sim", "compare", "--out", str(out), "--machine-events",
                                str(data / "machine_events_sample.csv")])
    assert alone.exit_code == 1
    assert alone.output.strip().splitlines() == [
        "Error: --machine-events goes with --trace (the same cell's task_events)"]
    bad = runner.invoke(app, ["sim", "compare", "--out", str(out), "--policies",
                              "fgd[fragmentaton=2]", "--no-sweeps"])
    assert bad.exit_code == 1
    assert bad.output.startswith("Error: policy 'fgd[fragmentaton=2]': unknown weight "
                                 "'fragmentaton'")
