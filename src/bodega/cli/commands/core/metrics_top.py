"""What ``bodega metrics`` shows for an app, per machine, and the PromQL it asks; pure.

Four figures per machine, each one query over the app's series (names as Fly's):
CPU % (the rate of ``fly_instance_cpu_seconds_total``), memory
(``fly_instance_memory_bytes``), requests per second (the rate of
``fly_app_http_responses_count``) and the 95th percentile of the response time
(``fly_app_http_response_time_seconds``' histogram; where a machine has no
buckets, the average from its ``_sum`` and ``_count``, or where HAProxy carries its
traffic, which keeps no histogram, HAProxy's own average over its last 1,024 responses,
``fly_app_http_response_time_seconds_avg``). A machine with no series
yet shows a dash, never a zero it did not measure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

WINDOW = "1m"
FIGURES = ("cpu", "memory", "rps", "p95", "avg")


def queries(app: str, window: str = WINDOW) -> dict[str, str]:
    """Each figure's PromQL, by machine."""
    sel = f'{{app="{app}"}}'
    seconds = "fly_app_http_response_time_seconds"
    return {
        "cpu": f"sum by (machine) (rate(fly_instance_cpu_seconds_total{sel}[{window}])) * 100",
        "memory": f"sum by (machine) (fly_instance_memory_bytes{sel})",
        "rps": f"sum by (machine) (rate(fly_app_http_responses_count{sel}[{window}]))",
        "p95": f"histogram_quantile(0.95, sum by (machine, le) "
               f"(rate({seconds}_bucket{sel}[{window}])))",
        "avg": f"(sum by (machine) (rate({seconds}_sum{sel}[{window}])) / "
               f"sum by (machine) (rate({seconds}_count{sel}[{window}]))) "
               f"or avg by (machine) ({seconds}_avg{sel})",
    }


@dataclass(frozen=True)
class MachineFigures:
    id: str
    region: str
    state: str
    cpu_percent: float | None = None
    memory_bytes: float | None = None
    requests_per_second: float | None = None
    latency_seconds: float | None = None
    latency: str | None = None  # "p95", or "avg" where only averages exist

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def figures(machines: Sequence[tuple[str, str, str]],
            found: Mapping[str, Mapping[str, float | None]]) -> list[MachineFigures]:
    """``machines``: (id, region, state) of each of the app's machines; ``found``: figure ->
    machine id -> value (from ``queries``' answers)."""
    rows = []
    for mid, region, state in sorted(machines, key=lambda m: (m[1], m[0])):
        def of(name: str, mid: str = mid) -> float | None:
            return _finite(found.get(name, {}).get(mid))
        p95, avg = of("p95"), of("avg")
        rows.append(MachineFigures(
            id=mid, region=region, state=state, cpu_percent=of("cpu"),
            memory_bytes=of("memory"), requests_per_second=of("rps"),
            latency_seconds=p95 if p95 is not None else avg,
            latency="p95" if p95 is not None else "avg" if avg is not None else None))
    return rows


def size(value: float | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return "-"


def cells(row: MachineFigures) -> tuple[str, ...]:
    """A row as the table shows it."""
    latency = ("-" if row.latency_seconds is None
               else f"{row.latency_seconds * 1000:.1f} ms" + (" (avg)" if row.latency == "avg"
                                                              else ""))
    return (row.id, row.region, row.state,
            "-" if row.cpu_percent is None else f"{row.cpu_percent:.1f}%",
            size(row.memory_bytes),
            "-" if row.requests_per_second is None else f"{row.requests_per_second:.1f}",
            latency)


COLUMNS = ("MACHINE", "REGION", "STATE", "CPU", "MEMORY", "REQ/S", "P95")
