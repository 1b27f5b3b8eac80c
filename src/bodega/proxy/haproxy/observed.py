"""What HAProxy's counters say: per-machine load for autostop, and metrics for ``/metrics``.

With HAProxy as the data plane, bodega's proxy no longer sees most requests,
so machine load comes from ``show stat``: a server's current and queued
sessions are its outstanding requests, and a machine whose session total
moved since the last look was busy in between. ``CombinedLoad`` adds the
requests bodega's own (activator) path forwarded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from bodega.proxy.core.load import Load
from bodega.proxy.haproxy.runtime import StatRow


class StatsLoad(Load):
    """A ``Load`` fed by HAProxy's per-server counters instead of by requests."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__(clock)
        self._totals: dict[str, int] = {}

    def observe(self, machines: Mapping[str, StatRow]) -> None:
        """One look at ``show stat``: the rows of servers that hold a machine, by machine id."""
        now = self.clock()
        for machine_id, row in machines.items():
            busy = row.current + row.queued
            moved = row.total != self._totals.get(machine_id, row.total)
            self._totals[machine_id] = row.total
            if busy:
                self.outstanding[machine_id] = busy
                self.idle_since.pop(machine_id, None)
                continue
            was_busy = self.outstanding.pop(machine_id, None) is not None
            if moved or was_busy or machine_id not in self.idle_since:
                self.idle_since[machine_id] = now


class CombinedLoad:
    """Several loads as one: a machine is busy if any says so, idle since the latest idle."""

    def __init__(self, *loads: Load) -> None:
        self.loads = loads

    @property
    def outstanding(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for load in self.loads:
            for machine_id, n in load.outstanding.items():
                total[machine_id] = total.get(machine_id, 0) + n
        return total

    @property
    def idle_since(self) -> dict[str, float]:
        busy = self.outstanding
        since: dict[str, float] = {}
        for load in self.loads:
            for machine_id, at in load.idle_since.items():
                if machine_id not in busy:
                    since[machine_id] = max(at, since.get(machine_id, at))
        return since

    def seen(self, machine_id: str) -> None:
        for load in self.loads:
            load.seen(machine_id)


class CarriedCounters:
    """HAProxy's counters made monotonic: each reload starts a process whose counters are zero.

    Prometheus counters never go back, so what a process counted is carried over
    into a base once a reload replaced it (or a counter is seen to drop).
    """

    def __init__(self) -> None:
        self.base: dict[tuple[str, ...], int] = {}
        self.last: dict[tuple[str, ...], int] = {}
        self.reloads = 0

    def update(self, raw: Mapping[tuple[str, ...], int],
               reloads: int) -> dict[tuple[str, ...], int]:
        """The totals for one look at the counters, ``reloads`` being how many there were."""
        restarted = reloads != self.reloads
        self.reloads = reloads
        for key, before in self.last.items():
            if restarted or raw.get(key, before) < before:
                self.base[key] = self.base.get(key, 0) + before
                self.last[key] = 0
        self.last.update(raw)
        return {key: self.base.get(key, 0) + self.last.get(key, 0)
                for key in self.base.keys() | self.last.keys()}


class HaproxyCollector(Collector):
    """HAProxy's counters, from the last ``show stat``, as ``bodega_haproxy_*`` metrics.

    ``servers`` maps (backend, server) to (app, machine id) for slots that hold a machine
    or are leaving one; ``apps`` maps a backend's name to the app that owns it. Counters
    carry over reloads.
    """

    def __init__(self) -> None:
        self.gauges: list[tuple[str, str, int, int]] = []  # app, machine, current, queued
        self.counters = CarriedCounters()
        self.totals: dict[tuple[str, ...], int] = {}

    def update(self, rows: Iterable[StatRow], servers: dict[tuple[str, str], tuple[str, str]],
               apps: dict[str, str], reloads: int) -> None:
        raw: dict[tuple[str, ...], int] = {}
        gauges: dict[tuple[str, str], tuple[int, int]] = {}
        for row in rows:
            if row.server == "FRONTEND":
                raw[("frontend", row.proxy)] = row.requests
            elif row.server == "BACKEND" and row.proxy in apps:
                app = apps[row.proxy]
                # An app has two backends (near and far): their counts add up.
                for code, n in row.responses:
                    raw[("responses", app, code)] = raw.get(("responses", app, code), 0) + n
                for kind, n in (("connect", row.connect_errors), ("retry", row.retries),
                                ("redispatch", row.redispatches)):
                    raw[("errors", app, kind)] = raw.get(("errors", app, kind), 0) + n
            elif (row.proxy, row.server) in servers:
                app, machine = servers[(row.proxy, row.server)]
                raw[("server", app, machine)] = raw.get(("server", app, machine), 0) + row.requests
                # A machine changing tier holds two slots for a moment: one gauge each.
                current, queued = gauges.get((app, machine), (0, 0))
                gauges[(app, machine)] = (current + row.current, queued + row.queued)
        self.totals = self.counters.update(raw, reloads)
        self.gauges = [(app, machine, current, queued)
                       for (app, machine), (current, queued) in gauges.items()]

    def collect(self) -> Iterator[Any]:
        families = {
            "frontend": CounterMetricFamily("bodega_haproxy_frontend_requests",
                                            "HTTP requests HAProxy received, by frontend",
                                            labels=["frontend"]),
            "responses": CounterMetricFamily("bodega_haproxy_app_responses",
                                             "HTTP responses by app and code class",
                                             labels=["app", "code"]),
            "server": CounterMetricFamily("bodega_haproxy_server_requests",
                                          "Requests HAProxy sent to each machine",
                                          labels=["app", "machine"]),
            "errors": CounterMetricFamily("bodega_haproxy_app_errors",
                                          "Connect errors, retries and redispatches by app",
                                          labels=["app", "kind"]),
        }
        for (family, *labels), n in sorted(self.totals.items()):
            families[family].add_metric(labels, n)
        current = GaugeMetricFamily("bodega_haproxy_server_current",
                                    "Requests in flight at each machine", labels=["app", "machine"])
        queued = GaugeMetricFamily("bodega_haproxy_server_queued",
                                   "Requests queued for each machine (at its hard limit)",
                                   labels=["app", "machine"])
        for app, machine, in_flight, waiting in self.gauges:
            current.add_metric([app, machine], in_flight)
            queued.add_metric([app, machine], waiting)
        reloads = CounterMetricFamily("bodega_haproxy_reloads",
                                      "Seamless reloads (changes of shape) since start")
        reloads.add_metric([], self.counters.reloads)
        yield from (*families.values(), current, queued, reloads)
