"""What every started machine uses, as ``fly_instance_*`` series on the worker's ``/metrics``.

Collected when scraped, in one pass over the started machines: their rows (id,
app, region, network namespace; no config decoded) and then each one's files
(``host/usage.py``). Nothing is kept between scrapes: a counter is the kernel's.
A figure with no source on this host (no cgroup, no network namespace of its
own) is left out, never written as 0.
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


class MachineFigures(Collector):
    def __init__(self, started: Callable[[], list[StartedRow]], reader: UsageReader,
                 host: str, org_of: Callable[[str], str]) -> None:
        self.started = started
        self.reader = reader
        self.host = host
        self.org_of = org_of

    def collect(self) -> Iterator[Any]:
        families = [(field, CounterMetricFamily(name, text, labels=LABELS) if counter
                     else GaugeMetricFamily(name, text, labels=LABELS))
                    for field, name, text, counter in SERIES]
        orgs: dict[str, str] = {}
        for machine_id, app, region, netns in self.started():
            usage = self.reader.read(machine_id, own_netns=netns is not None)
            if usage is None:
                continue
            if app not in orgs:
                orgs[app] = self.org_of(app)
            labels = [app, machine_id, region, self.host, orgs[app]]
            for field, family in families:
                value = getattr(usage, field)
                if value is not None:
                    family.add_metric(labels, value)
        yield from (family for _, family in families)

