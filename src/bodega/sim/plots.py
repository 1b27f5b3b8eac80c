"""The comparison's plots, as PNG files: the one module of bodega.sim that draws.

Uses matplotlib's object API (``Figure``), never ``pyplot``: no global
figure state and no display backend, so it runs headless and in tests.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bodega.sim.compare import Comparison
from bodega.sim.jobs import SAMPLING, JobSimResult
from bodega.sim.measures import Measures, series, utilizations

JobRows = list[tuple[float, JobSimResult, JobSimResult]]  # (load, result, its ideal)


def draw(comparison: Comparison, directory: Path) -> list[Path]:
    """Write the plots into ``directory``; returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = [_over_time(comparison, directory / "utilization-over-time.png"),
               _cdf(comparison, directory / "utilization-cdf.png")]
    if comparison.by_load:
        written.append(_against(comparison.by_load, "load (x the default workload's rate)",
                                directory / "rejections-vs-load.png"))
    if comparison.by_delay:  # stale views cost refusals (races) long before rejections
        written.append(_against(comparison.by_delay, "gossip delay (s)",
                                directory / "refusals-vs-staleness.png", refusals=True))
    return written


def _over_time(comparison: Comparison, path: Path) -> Path:
    fig = Figure(figsize=(9, 4.5))
    ax = fig.subplots()
    for name, result in comparison.results.items():
        s = series(result)
        ax.plot(s["hours"], s["p99"], label=f"{name} p99", linewidth=1.2)
    ax.set_xlabel("hours into the trace")
    ax.set_ylabel("p99 host utilization")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Hot spots over time ({comparison.trace.name})")
    _legend(ax, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _cdf(comparison: Comparison, path: Path) -> Path:
    fig = Figure(figsize=(6.5, 4.5))
    ax = fig.subplots()
    for name, result in comparison.results.items():
        values = np.sort(utilizations(result))
        if len(values):
            ax.plot(values, np.arange(1, len(values) + 1) / len(values), label=name)
    ax.axvline(0.9, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("host utilization (busier of cpu and memory)")
    ax.set_ylabel("fraction of host-samples at or below")
    ax.set_title("CDF of host utilization")
    _legend(ax)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _against(sweep: dict[str, list[tuple[float, Measures]]], xlabel: str, path: Path,
             refusals: bool = False) -> Path:
    fig = Figure(figsize=(6.5, 4.5))
    ax = fig.subplots()
    for name, points in sweep.items():
        xs = [x for x, _ in points]
        ys = [100 * (m.refusals if refusals else m.rejected) / max(1, m.creates)
              for _, m in points]
        ax.plot(xs, ys, marker="o", label=name)
    what = "Workers saying no" if refusals else "Rejections"
    ax.set_xlabel(xlabel)
    ax.set_ylabel("workers that said no, per 100 creates" if refusals
                  else "creates rejected (%)")
    ax.set_title(f"{what} against {xlabel.split(' (')[0]}")
    _legend(ax)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def draw_jobs(rows: JobRows, directory: Path) -> list[Path]:
    """``bodega sim jobs``'s sweep as two PNGs (median and p99 response time over the
    ideal's, against d, a panel per load); returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    return [_jobs_against_d(rows, "median", directory / "jobs-median-vs-d.png"),
            _jobs_against_d(rows, "p99", directory / "jobs-p99-vs-d.png")]


def _jobs_against_d(rows: JobRows, what: str, path: Path) -> Path:
    loads = sorted({load for load, _, _ in rows})
    fig = Figure(figsize=(5.5 * len(loads), 4.5))
    axes = fig.subplots(1, len(loads), squeeze=False)[0]
    for ax, load in zip(axes, loads, strict=True):
        at = [(r, ideal) for lo, r, ideal in rows if lo == load]
        for scheduler in SAMPLING:
            points = sorted((r.d, getattr(r, what) / getattr(ideal, what))
                            for r, ideal in at if r.scheduler == scheduler)
            ax.plot([d for d, _ in points], [y for _, y in points], marker="o",
                    label=scheduler)
        for r, ideal in at:  # the schedulers without a d: a level line each
            if r.scheduler not in SAMPLING:
                ax.axhline(getattr(r, what) / getattr(ideal, what), linestyle="--",
                           linewidth=1, color="grey" if r.scheduler == "omniscient" else "k",
                           label=r.scheduler)
        ax.set_xlabel("probes per task, d")
        ax.set_ylabel(f"{what} job response time / ideal's")
        ax.set_title(f"load {load:g}")
        _legend(ax)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Batch schedulers against the omniscient one ({what})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _legend(ax: Axes, ncol: int = 1) -> None:
    """A legend, when there is anything to label (a run with no samples draws no line)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, ncol=ncol)
