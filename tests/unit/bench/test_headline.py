"""``make bench``'s table (bench/headline.py), built from what each headline bench prints:
the output is made by the bench's own printing code wherever it has a function for it, so
a bench whose output changes shape fails here rather than leaving a blank in the table."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench import headline
from bench.cli.startup import line as cli_line
from bench.headline import HEADLINES, Row, table
from bench.machines.start import report as start_report
from bench.placement.creates import report as placement_report
from bench.proxy.http import WrkResult
from bench.proxy.http import report as proxy_report
from bench.rigs.loadgen import Result

ROOT = Path(__file__).resolve().parents[3]


def rows_of(name: str, outputs: dict[str, str]) -> list[Row]:
    (found,) = [h for h in HEADLINES if h.name == name]
    assert set(found.runs) == set(outputs)
    return found.rows(outputs)


def test_machine_start_reads_the_up_line_against_the_bare_spawn(
        capsys: pytest.CaptureFixture[str]) -> None:
    start_report({"bare": [0.010, 0.011, 0.012], "up": [0.020, 0.0245, 0.030],
                  "broker": [0.02, 0.03], "worker": [0.01, 0.02]},
                 [], 3, ["0.10 0.20 0.30"] * 2, {}, "")
    (row,) = rows_of("machines", {"start": capsys.readouterr().out})
    assert (row.bodega, row.peer, row.peer_name) == (24.5, 11.0, "bare spawn")
    assert row.ratio == pytest.approx(24.5 / 11.0)


def test_placement_reads_creates_per_second_of_both_runs(
        capsys: pytest.CaptureFixture[str]) -> None:
    outputs = {}
    for name, seconds in (("20 workers", 2.0), ("4 workers", 1.6)):
        placement_report("trivial endpoint (ceiling)", Result(0.1, [0.001] * 1000, {200: 1000}))
        placement_report("create machine", Result(seconds, [0.003] * 1000, {201: 1000}))
        outputs[name] = capsys.readouterr().out
    (row,) = rows_of("placement", outputs)
    assert (row.bodega, row.peer) == (500, 625)
    assert row.ratio == pytest.approx(0.8)


def test_proxy_reads_bodega_against_nginx_not_direct(
        capsys: pytest.CaptureFixture[str]) -> None:
    loaded = {"direct": WrkResult(47789, 0.3, 1.0, ""), "nginx": WrkResult(20116, 1.4, 3.0, ""),
              "bodega": WrkResult(17482, 1.7, 4.0, "")}
    proxy_report(argparse.Namespace(connections=32, duration=4.0, rounds=2), loaded, loaded,
                 "data plane: haproxy")
    (row,) = rows_of("proxy", {"http": capsys.readouterr().out})
    assert (row.bodega, row.peer, row.peer_name) == (17482, 20116, "nginx")


def test_jobs_reads_each_pools_figures_line() -> None:
    ours = {"dispatch_p50_ms": 16.8, "makespan_s_1000": 1.88, "makespan_rounds_s_1000": [1.9]}
    theirs = {"dispatch_p50_ms": 1.96, "makespan_s_1000": 1.29}
    # As bench.jobs.queues prints each pool's figures, then its own table.
    text = (f"bodega: {json.dumps(ours)}\nblmove: {json.dumps(theirs)}\n\n"
            "dispatch latency p50 (ms)   16.8   1.96   8.59x\n")
    makespan, dispatch = rows_of("jobs", {"queues": text})
    assert (makespan.bodega, makespan.peer) == (1.88, 1.29)
    assert (dispatch.bodega, dispatch.peer) == (16.8, 1.96)


def test_cli_reads_apps_list_against_its_baseline() -> None:
    text = "\n".join([
        "10 runs each, interleaved (context); load average 0.1 before, 0.2 after:",
        cli_line("bodega --help", [0.07, 0.071, 0.072], 0.012),
        cli_line("bodega apps list", [0.23, 0.233, 0.24], 0.0121)])
    (row,) = rows_of("cli", {"startup": text})
    assert (row.bodega, row.peer, row.peer_name) == (233.0, 12.1, "python3 -c pass")


def test_network_reads_the_overlay_and_the_resolver() -> None:
    # As bench.network.private prints them.
    text = "\n".join([
        f"{'path':10} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8}",
        f"{'overlay':10} {6716.0:10.0f} {1.63:8.3f} {11.6:8.3f} ",
        f"{'plain':10} {15482.0:10.0f} {0.43:8.3f} {8.1:8.3f} ",
        "name follows a start on another host: median 0.019 s, max 0.187 s; ...",
        f"dns {'bodega':8} {39629.0:10.0f} answers/s   lost 0",
        f"dns {'dnsmasq':8} {54149.0:10.0f} answers/s   lost 0"])
    overlay, dns = rows_of("network", {"private": text})
    assert (overlay.bodega, overlay.peer) == (6716, 15482)
    assert (dns.bodega, dns.peer, dns.peer_name) == (39629, 54149, "dnsmasq")


def test_a_bench_that_printed_nothing_leaves_a_blank_not_a_figure() -> None:
    for found in HEADLINES:
        rows = found.rows(dict.fromkeys(found.runs, "Traceback (most recent call last):\n"))
        assert rows
        assert all(r.bodega is None and r.peer is None and r.ratio is None for r in rows)


def test_the_table_has_a_line_per_figure_with_the_ratio_of_bodega_over_its_peer() -> None:
    text = table([Row("creates, 20 workers", 562.0, "4 workers", 563.0, "/s"),
                  Row("job dispatch p50", 16.8, "Redis BLMOVE", 1.96, "ms"),
                  Row("private DNS", None, "dnsmasq", 54149.0, "answers/s")])
    head, *lines = text.splitlines()
    assert head.split() == ["figure", "bodega", "peer", "ratio"]
    assert len(lines) == 3
    assert lines[0].split()[-5:] == ["562", "4", "workers", "563", "1.00x"]
    assert lines[1].split()[-5:] == ["16.8", "Redis", "BLMOVE", "1.96", "8.57x"]
    assert lines[2].split()[-4:] == ["-", "dnsmasq", "54,149", "-"]
    # One column each: every ratio ends at the same place.
    assert len({len(line) for line in lines[:2]}) == 1


def test_the_table_comes_again_from_saved_outputs(tmp_path: Path) -> None:
    text = "\n".join([cli_line("bodega apps list", [0.2, 0.2, 0.2], 0.01)])
    (tmp_path / headline.saved_name("cli", "startup")).write_text(text)
    done = subprocess.run([sys.executable, "-m", "bench.headline", "--from", str(tmp_path),
                           "--only", "cli"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].endswith("20.00x")
    missing = subprocess.run([sys.executable, "-m", "bench.headline", "--from", str(tmp_path),
                              "--only", "cli,proxy"], cwd=ROOT, capture_output=True, text=True,
                             check=False)
    assert missing.returncode == 1
    assert "no figure from its bench: HTTP through the proxy, keep-alive" in missing.stdout
