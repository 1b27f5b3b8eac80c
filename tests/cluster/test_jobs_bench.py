"""bench/jobs/queues.py at a tiny size, so it cannot rot: every figure comes out, for every pool,
and the kill -9 comes out as the pools' designs say (bodega and the BLMOVE pool lose nothing and
run the dead worker's jobs again; the BLPOP pool loses exactly the jobs the dead worker held).
No time is asserted: the figures are the bench's to print, not the test's to judge."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


def test_the_jobs_bench_runs_and_bodega_loses_no_job(tmp_path: Path) -> None:
    assert shutil.which("redis-server"), "redis-server missing: run scripts/host-packages"
    out = tmp_path / "figures.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench.jobs.queues", "--workers", "2", "--slots", "1", "--jobs", "6",
         "--runs", "2", "--rhos", "0.5", "--arrivals", "4", "--service", "0.3",
         "--kill-seconds", "3", "--lease", "3", "--lost-after", "5", "--claim-jobs", "3",
         "--claimers", "3",
         "--phases", "dispatch,makespan,queueing,kill,claims,singles,list", "--singles", "4",
         # The pools' kill -9 phases mostly wait (the lost job's whole allowance): side by
         # side, as no time is judged here.
         "--pools-at-once", "--before-src", str(ROOT / "src"), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads(out.read_text())
    common = ["dispatch_p50_ms", "dispatch_p99_ms", "makespan_s_6", "cpu_s_per_1000_6",
              "delay_p50_ms_rho0.5", "delay_p99_ms_rho0.5", "jobs_lost", "rerun_s",
              # the article's shape: one-task jobs submitted one by one, then as one list
              "one_makespan_s_4", "one_submit_p50_ms_4", "one_submit_p99_ms_4",
              "one_start_p50_ms_4", "one_start_p99_ms_4", "one_cpu_ms_per_job_4",
              "one_client_cpu_ms_per_job_4", "list_makespan_s_4", "list_cpu_ms_per_job_4"]
    for pool in ("before", "bodega", "blmove", "blpop"):  # before: bodega from a source tree
        assert all(key in figures[pool] for key in common), figures[pool]
        assert figures[pool]["held_by_killed_worker"] >= 1, figures[pool]
    for pool in ("before", "bodega", "blmove"):
        assert figures[pool]["jobs_lost"] == 0, figures[pool]
        assert math.isfinite(figures[pool]["rerun_s"]), figures[pool]
    assert figures["blpop"]["jobs_lost"] == figures["blpop"]["held_by_killed_worker"]
    assert figures["bodega"]["claims_tried_per_job_no_wait"] >= 1  # its own claim, and 409s
    assert figures["bodega"]["claims_tried_per_job_random_wait"] >= 1
    assert "bodega/blmove" in run.stdout
    assert "before/blmove" in run.stdout
    assert "4 single submits: makespan (s)" in run.stdout
