"""What every started machine uses, as ``fly_instance_*`` series on the worker's ``/metrics``.

Collected when scraped, in one pass over the started machines: their rows (id,
app, region, network namespace; no config decoded) and then each one's files
(``host/usage.py``). A figure with no source on this host (no cgroup, no network
namespace of its own) is left out, never written as 0.

A counter never steps back while its machine stays started: a sum over a
machine's processes (cgroup v1, no cpuacct or blkio cgroup) loses what a process
that ended had counted, and a run's new cgroup starts from 0. What a counter lost
is kept beside it (``Floors``), so it goes on from where it was; a machine a
scrape finds stopped is forgotten, and starts from its kernel's count when started.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from bodega.worker.host.usage import UsageReader

LABELS = ["app", "machine", "region", "host", "org"]
# The series, by MachineUsage field: name, help, counter (else gauge).
SERIES: tuple[tuple[str, str, str, bool], ...] = (
    ("cpu_seconds", "fly_instance_cpu_seconds", "CPU time the machine's processes used "
     "(user and system)", True),
    ("memory_bytes", "fly_instance_memory_bytes", "Memory the machine's cgroup holds now "
     "(page cache included)", False),
    ("memory_peak_bytes", "fly_instance_memory_peak_bytes", "The most memory the machine's "
     "cgroup held at once", False),
    ("memory_limit_bytes", "fly_instance_memory_limit_bytes", "The machine's memory limit",
     False),
    ("io_read_bytes", "fly_instance_io_read_bytes", "Bytes the machine read from storage",
     True),
    ("io_write_bytes", "fly_instance_io_write_bytes", "Bytes the machine wrote to storage",
     True),
    ("net_recv_bytes", "fly_instance_net_recv_bytes", "Bytes the machine's network interface "
     "received (machines with a network namespace of their own)", True),
    ("net_sent_bytes", "fly_instance_net_sent_bytes", "Bytes the machine's network interface "
     "sent (machines with a network namespace of their own)", True),
)

StartedRow = tuple[str, str, str, str | None]  # id, app, region, netns


COUNTERS = tuple(field for field, _, _, counter in SERIES if counter)


class Floors:
    """What each started machine's counters lost when they stepped back, kept so the series
    go on from where they were: (machine, field) -> (its last reading, what was lost)."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, str], tuple[float, float]] = {}

    def value(self, machine_id: str, field: str, reading: float) -> float:
        last, lost = self.kept.get((machine_id, field), (reading, 0.0))
        if reading < last:
            lost += last - reading
        self.kept[(machine_id, field)] = (reading, lost)
        return reading + lost

    def keep_only(self, machines: set[str]) -> None:
        self.kept = {key: kept for key, kept in self.kept.items() if key[0] in machines}


class MachineFigures(Collector):
    def __init__(self, started: Callable[[], list[StartedRow]], reader: UsageReader,
                 host: str, org_of: Callable[[str], str]) -> None:
        self.started = started
        self.reader = reader
        self.host = host
        self.org_of = org_of
        self.floors = Floors()

    def collect(self) -> Iterator[Any]:
        families = [(field, CounterMetricFamily(name, text, labels=LABELS) if counter
                     else GaugeMetricFamily(name, text, labels=LABELS))
                    for field, name, text, counter in SERIES]
        orgs: dict[str, str] = {}
        started = self.started()
        self.floors.keep_only({row[0] for row in started})
        for machine_id, app, region, netns in started:
            usage = self.reader.read(machine_id, netns)
            if usage is None:
                continue
            if app not in orgs:
                orgs[app] = self.org_of(app)
            labels = [app, machine_id, region, self.host, orgs[app]]
            for field, family in families:
                value = getattr(usage, field)
                if value is None:
                    continue
                if field in COUNTERS:
                    value = self.floors.value(machine_id, field, value)
                family.add_metric(labels, value)
        yield from (family for _, family in families)

