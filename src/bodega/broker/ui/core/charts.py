"""The metrics charts of an app's and a machine's pages: their PromQL and their drawing; pure.

Each chart is one PromQL range query over the last ``SPAN`` seconds, asked through
the org's query API with the visitor's token (``ui/charts.py``), and drawn as an SVG
polyline in a ``WIDTH`` x ``HEIGHT`` box, lowest value at the bottom, the newest
value written beside it. The figures are Fly's series (``docs/metrics.md``),
summed over the app's machines, or of the one machine; the last chart is how many
of the app's ``[metrics]`` endpoints the store reaches. A chart with no samples
says so instead of drawing a flat line it did not measure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT = 240, 60
SPAN = 900.0  # seconds shown
POINTS = 60  # samples asked for over the span
WINDOW = "1m"  # the rates' window


@dataclass(frozen=True)
class ChartSpec:
    key: str
    title: str
    unit: str  # "%", "bytes", "/s", "s", or "" for a count


SPECS = (ChartSpec("cpu", "CPU", "%"), ChartSpec("memory", "Memory", "bytes"),
         ChartSpec("rps", "Requests", "/s"),
         ChartSpec("p95", "Latency p95 (HAProxy: average)", "s"),
         ChartSpec("up", "[metrics] endpoints up", ""))


def chart_queries(app: str, machine: str | None = None) -> dict[str, str]:
    """Each chart's PromQL: the app's, or one machine's."""
    sel = f'app="{app}"' + (f',machine="{machine}"' if machine else "")
    seconds = "fly_app_http_response_time_seconds"
    return {
        "cpu": f"sum(rate(fly_instance_cpu_seconds_total{{{sel}}}[{WINDOW}])) * 100",
        "memory": f"sum(fly_instance_memory_bytes{{{sel}}})",
        "rps": f"sum(rate(fly_app_http_responses_count{{{sel}}}[{WINDOW}]))",
        # HAProxy keeps no histogram: where it carries the app, its own running average.
        "p95": f"histogram_quantile(0.95, sum by (le) (rate({seconds}_bucket{{{sel}}}[{WINDOW}])))"
               f" or avg({seconds}_avg{{{sel}}})",
        "up": f'sum(up{{{sel},job="apps"}})',
    }


def step(span: float = SPAN, points: int = POINTS) -> float:
    return max(1.0, span / points)


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    points: str  # the polyline's points ("" when there is nothing to draw)
    last: str  # the newest value, with its unit ("" with no samples)
    low: str
    high: str

    @property
    def empty(self) -> bool:
        return not self.points


def shown(value: float, unit: str) -> str:
    if unit == "bytes":
        for name in ("B", "KiB", "MiB", "GiB"):
            if abs(value) < 1024 or name == "GiB":
                return f"{value:.0f} {name}" if name == "B" else f"{value:.1f} {name}"
            value /= 1024
    if unit == "s":
        return f"{value * 1000:.1f} ms"
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "/s":
        return f"{value:.1f}/s"
    return f"{value:g}"


def chart(spec: ChartSpec, samples: Sequence[tuple[float, float]], start: float,
          end: float) -> Chart:
    """``samples``: (unix time, value), drawn across [start, end]; values that are no number
    (NaN, infinite: a quantile of nothing) are left out."""
    kept = sorted((t, v) for t, v in samples if math.isfinite(v) and start <= t <= end)
    if not kept:
        return Chart(spec.key, spec.title, "", "", "", "")
    low, high = min(v for _, v in kept), max(v for _, v in kept)
    span = end - start or 1.0

    def height_of(value: float) -> float:  # a line that never moved: across the middle
        if high == low:
            return HEIGHT / 2
        return HEIGHT - 2 - (HEIGHT - 4) * (value - low) / (high - low)

    drawn = [(WIDTH * (t - start) / span, height_of(v)) for t, v in kept]
    if len(drawn) == 1:  # one sample: a short flat stroke ending at it
        x, y = drawn[0]
        drawn = [(max(0.0, x - 4), y), (x, y)]
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in drawn)
    return Chart(spec.key, spec.title, points, shown(kept[-1][1], spec.unit),
                 shown(low, spec.unit), shown(high, spec.unit))
