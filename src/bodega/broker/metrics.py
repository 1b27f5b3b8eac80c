"""The broker's Prometheus metrics, in a registry it owns (several daemons may share a process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class BrokerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.placement_seconds = Histogram(
            "bodega_placement_seconds", "Time to place a machine, from request to a worker's yes",
            ["outcome"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.rank_seconds = Histogram(
            "bodega_placement_rank_seconds", "Time to filter and rank one region's workers",
            buckets=LATENCY_BUCKETS, registry=self.registry)
        self.attempts = Histogram(
            "bodega_placement_attempts", "Workers asked per placement",
            buckets=(1, 2, 3, 4, 5, 8, 12, 20, 50), registry=self.registry)
        self.rejections = Counter(
            "bodega_placement_rejections_total",
            "Workers that could not take a machine, by reason: refused by the broker's filters "
            "(cpu, memory, cordoned, ...) or by the worker itself (worker_capacity, "
            "worker_cordoned, unreachable)", ["reason"], registry=self.registry)
        self.shadow_decisions = Counter(
            "bodega_placement_shadow_total",
            "Creates ranked by the shadow policy too, by whether it would have asked the same "
            "worker first", ["verdict"], registry=self.registry)
        self.requests = Counter(
            "bodega_api_requests_total", "Public API requests by route and status code",
            ["route", "code"], registry=self.registry)
