"""What every app serves, as ``fly_app_*`` and ``fly_edge_*`` series on the proxy's ``/metrics``.

Two sources, one set of series: HAProxy's own counters where it carries the
traffic (each ``show stat`` the data plane reads, every second), and the
Python data plane's count of the requests it answers itself (all of them when
it is the data plane; those HAProxy hands it when HAProxy is: a sleeping
machine's wake, a static file, a fly-replay). HAProxy's counts are read, never
recounted: each machine's server row (``hrsp_*`` by status class, ``stot``,
``scur``, ``rtime``), each app's backend rows (near and far) for the edge. HAProxy
counts by slot, and a slot goes to the next machine once emptied: what a row
counted since the last look is its occupant's (``observe_haproxy``).

HAProxy keeps no latency histogram, only an average over each server's last
1024 requests: it is exported as a gauge, ``fly_app_http_response_time_seconds_avg``.
The Python data plane times every request, so what it answers is a histogram,
``fly_app_http_response_time_seconds``. The ``_count`` series keep Fly's
names, which do not end in ``_total``: they only ever go up, but are exported untyped,
as a counter's name would get ``_total`` added.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from bodega.proxy.haproxy.runtime import StatRow
from bodega.proxy.metrics import LATENCY

LABELS = ["app", "machine", "region", "host", "org"]
STATUSES = ("2xx", "3xx", "4xx", "5xx", "other")
RESPONSES = "fly_app_http_responses_count"
CONNECTS = "fly_app_tcp_connects_count"
EDGE = "fly_edge_http_responses_count"


def status_class(code: int) -> str:
    """A status code's class: 2xx to 5xx, else other (1xx, and no answer at all)."""
    return f"{code // 100}xx" if 200 <= code < 600 else "other"


def haproxy_class(name: str) -> str:
    """HAProxy's ``hrsp_*`` column as a class (its 1xx is other here)."""
    return name if name in STATUSES else "other"


@dataclass(frozen=True)
class Place:
    """Where a machine is, for its labels: its app, region and host (its worker); and
    whether the proxy routes new requests to it (``balance.usable``)."""

    app: str
    region: str
    host: str
    routed: bool = True


@dataclass
class Latencies:
    """One machine's requests timed by the Python data plane, in ``LATENCY`` buckets."""

    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY))
    count: int = 0
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        for i, bound in enumerate(LATENCY):
            if seconds <= bound:
                self.buckets[i] += 1
                break

    def cumulative(self) -> list[tuple[str, float]]:
        out, running = [], 0
        for bound, n in zip(LATENCY, self.buckets, strict=True):
            running += n
            out.append((str(float(bound)), float(running)))
        out.append(("+Inf", float(self.count)))
        return out


class AppFigures(Collector):
    """The apps' series. ``places`` gives each machine's app, region and host now;
    ``org_of`` an app's org; ``edge`` is this proxy's region and name, the edge series'
    region and host; ``outstanding`` the Python plane's requests in flight by machine."""

    def __init__(self, places: Callable[[], Mapping[str, Place]],
                 org_of: Callable[[str], str], edge: tuple[str, str],
                 outstanding: Callable[[], Mapping[str, int]] | None = None) -> None:
        self.places = places
        self.org_of = org_of
        self.edge = edge
        # The Python plane's requests in flight, by machine (its ``Load``).
        self.outstanding = outstanding
        self.haproxy: dict[tuple[str, ...], int] = {}  # what HAProxy counted, by series
        self.seen: dict[tuple[str, str], tuple[int, ...]] = {}  # each row's counts, last look
        self.reloads = 0
        self.concurrency: dict[tuple[str, str], int] = {}  # (app, machine) -> scur
        self.response_avg: dict[tuple[str, str], float] = {}  # (app, machine) -> seconds
        self.plane: dict[tuple[str, ...], int] = {}
        self.latencies: dict[tuple[str, str], Latencies] = {}

    # -- the sources ----------------------------------------------------------------------
    def observe_haproxy(self, rows: Iterable[StatRow],
                        servers: Mapping[tuple[str, str], tuple[str, str]],
                        apps: Mapping[str, str], reloads: int,
                        tcp_servers: Mapping[tuple[str, str], tuple[str, str]] | None = None,
                        ) -> None:
        """One ``show stat``: ``servers`` maps (backend, server) to (app, machine) for each
        slot holding a machine or leaving one (``Layout.leaving``), ``tcp_servers`` the
        same for the TCP services' slots (no HTTP series), ``apps`` an app's backends to
        the app.

        HAProxy counts by slot, and a slot (a backend, too) is reused by the next machine
        (app) once emptied: what a row counted since the last look is its occupant's now.
        A reload starts a process whose counts are zero, so they count from zero again."""
        if reloads != self.reloads:
            self.reloads = reloads
            self.seen.clear()
        tcp = tcp_servers or {}
        concurrency: dict[tuple[str, str], int] = {}
        averages: dict[tuple[str, str], float] = {}
        for row in rows:
            slot = (row.proxy, row.server)
            counts = (*(n for _, n in row.responses), row.total)
            before = self.seen.get(slot)
            self.seen[slot] = counts
            if before is None or any(n < b for n, b in zip(counts, before, strict=True)):
                before = tuple(0 for _ in counts)  # a new process's counters
            moved = [n - b for n, b in zip(counts, before, strict=True)]
            if row.server == "BACKEND":
                app = apps.get(row.proxy)
                if app is not None:  # near and far backends add up
                    for (name, _), n in zip(row.responses, moved, strict=False):
                        self._add(("edge", app, haproxy_class(name)), n)
                continue
            place = servers.get(slot)
            http = place is not None
            place = place or tcp.get(slot)
            if place is None:
                continue
            app, machine = place
            if http:
                for (name, _), n in zip(row.responses, moved, strict=False):
                    self._add(("responses", app, machine, haproxy_class(name)), n)
            self._add(("connects", app, machine), moved[-1])
            concurrency[place] = concurrency.get(place, 0) + row.current
            if http and self._answered(app, machine):  # an average of its answers
                # (a machine in two slots for a moment: the slower says)
                averages[place] = max(averages.get(place, 0.0), row.response_ms / 1000)
        self.concurrency = concurrency
        self.response_avg = averages

    def _add(self, key: tuple[str, ...], n: int) -> None:
        if n or key not in self.haproxy:
            self.haproxy[key] = self.haproxy.get(key, 0) + n

    def _answered(self, app: str, machine: str) -> bool:
        return any(self.haproxy.get(("responses", app, machine, status))
                   for status in STATUSES)

    def observe_request(self, app: str, machine: str | None, code: int,
                        seconds: float) -> None:
        """One request the Python data plane answered (``machine``: the one that did, None
        when none did: a 503 with no machine to send it to, a static file)."""
        status = status_class(code)
        self.plane[("edge", app, status)] = self.plane.get(("edge", app, status), 0) + 1
        if machine is None:
            return
        key = ("responses", app, machine, status)
        self.plane[key] = self.plane.get(key, 0) + 1
        latencies = self.latencies.get((app, machine))
        if latencies is None:
            latencies = self.latencies[(app, machine)] = Latencies()
        latencies.observe(seconds)

    # -- the series -----------------------------------------------------------------------
    def collect(self) -> Iterator[Any]:
        places = self.places()
        self._forget_gone(places)
        orgs: dict[str, str] = {}

        def labels(app: str, machine: str) -> list[str]:
            if app not in orgs:
                orgs[app] = self.org_of(app)
            place = places.get(machine)
            return [app, machine, place.region if place else "", place.host if place else "",
                    orgs[app]]

        responses = Metric(RESPONSES, "HTTP responses each machine gave, by status class",
                           "unknown")
        connects = Metric(CONNECTS, "Connections the edge opened to each machine (HAProxy's "
                          "stot: HTTP and TCP services)", "unknown")
        edge = Metric(EDGE, "HTTP responses the edge gave for each app, by status class "
                      "(its own answers too: no machine to send a request to)", "unknown")
        counts: dict[tuple[str, ...], int] = dict(self.haproxy)
        for key, n in self.plane.items():
            counts[key] = counts.get(key, 0) + n
        for key, n in sorted(counts.items()):
            kind, app = key[0], key[1]
            if kind == "responses":
                responses.add_sample(RESPONSES, {**_named(labels(app, key[2])),
                                                 "status": key[3]}, n)
            elif kind == "connects":
                connects.add_sample(CONNECTS, _named(labels(app, key[2])), n)
            else:
                edge.add_sample(EDGE, {"app": app, "region": self.edge[0],
                                       "host": self.edge[1], "org": labels(app, "")[4],
                                       "status": key[2]}, n)
        concurrency = GaugeMetricFamily("fly_app_concurrency", "Requests or connections "
                                        "each machine has open now (HAProxy's scur)",
                                        labels=LABELS)
        for (app, machine), n in sorted(self._concurrency(places).items()):
            concurrency.add_metric(labels(app, machine), n)
        average = GaugeMetricFamily(
            "fly_app_http_response_time_seconds_avg", "Average time to each machine's "
            "response headers over its last 1024 requests (HAProxy's rtime)", labels=LABELS)
        for (app, machine), seconds in sorted(self.response_avg.items()):
            average.add_metric(labels(app, machine), seconds)
        histogram = HistogramMetricFamily(
            "fly_app_http_response_time_seconds", "Time from a request's head to the end of "
            "its response, for the requests the Python data plane answered", labels=LABELS)
        for (app, machine), latencies in sorted(self.latencies.items()):
            histogram.add_metric(labels(app, machine), latencies.cumulative(), latencies.total)
        yield from (responses, connects, edge, concurrency, average, histogram)


    def _forget_gone(self, places: Mapping[str, Place]) -> None:
        """A machine the proxy no longer knows of (destroyed) has its series dropped, which
        would otherwise stay, without a region or host, for as long as the proxy runs; an
        app's edge series stay. Prometheus sees the series end, as when a worker's does."""
        def kept(key: tuple[str, ...]) -> bool:
            return key[0] == "edge" or key[2] in places
        self.haproxy = {key: n for key, n in self.haproxy.items() if kept(key)}
        self.plane = {key: n for key, n in self.plane.items() if kept(key)}
        self.latencies = {key: timed for key, timed in self.latencies.items()
                          if key[1] in places}

    def _concurrency(self, places: Mapping[str, Place]) -> dict[tuple[str, str], int]:
        """HAProxy's open sessions, and the Python plane's requests in flight added to
        them for every machine routed to (0 when idle) or still answering some. A machine
        out of the rotation (cordoned, stopped) gets no 0 of the Python plane's: its
        figure is HAProxy's for the slot it is leaving while requests it took there are
        open, and a 0 from here would say it had none (an autoscaler draining it would
        stop it under them)."""
        concurrency = dict(self.concurrency)
        if self.outstanding is not None:
            in_flight = self.outstanding()
            for machine, place in places.items():
                key = (place.app, machine)
                if place.routed or in_flight.get(machine, 0) or key in concurrency:
                    concurrency[key] = concurrency.get(key, 0) + in_flight.get(machine, 0)
        return concurrency


def _named(values: list[str]) -> dict[str, str]:
    return dict(zip(LABELS, values, strict=True))
