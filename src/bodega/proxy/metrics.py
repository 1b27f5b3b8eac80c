"""The proxy's Prometheus metrics."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter("bodega_proxy_requests_total", "Requests by app and status code",
                                ["app", "code"], registry=self.registry)
        self.latency = Histogram("bodega_proxy_request_seconds",
                                 "Time from request head to the end of the response, by app",
                                 ["app"], buckets=LATENCY, registry=self.registry)
        self.upstream_errors = Counter(
            "bodega_proxy_upstream_errors_total",
            "Failures talking to machines: connect (retried elsewhere), reset, silent (its host "
            "never acknowledged a request)",
            ["app", "kind"], registry=self.registry)
        self.autostarts = Counter("bodega_proxy_autostarts_total",
                                  "Machines the proxy started, by app and outcome",
                                  ["app", "outcome"], registry=self.registry)
        self.autostart_seconds = Histogram(
            "bodega_proxy_autostart_seconds", "From asking a worker to start a machine to its "
            "port accepting", buckets=LATENCY, registry=self.registry)
        self.autostops = Counter("bodega_proxy_autostops_total", "Idle machines stopped, by app",
                                 ["app"], registry=self.registry)
        self._per_request: dict[tuple[str, int], tuple[Any, Any]] = {}
        self.failovers = Counter("bodega_proxy_failovers_total",
                                 "Standbys or stopped machines started because a worker died",
                                 ["app"], registry=self.registry)

    def observe(self, app: str, code: int, seconds: float) -> None:
        """Count one request; the labelled children are kept, as lookups cost per request."""
        children = self._per_request.get((app, code))
        if children is None:
            children = (self.requests.labels(app, str(code)), self.latency.labels(app))
            self._per_request[(app, code)] = children
        children[0].inc()
        children[1].observe(seconds)
