"""Replication metrics, in the ``CollectorRegistry`` the daemon owns (beside membership's)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from bodega.registry.replication.core.schema import TABLES
from bodega.registry.replication.replica import Replica


class ReplicationMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.rejected = Counter(
            "bodega_registry_rows_rejected_total",
            "Rows refused by validation, by table and reason (never applied)",
            ["table", "reason"], registry=registry)
        self.applied = Counter(
            "bodega_registry_rows_applied_total",
            "Rows that changed this replica, by where they came from", ["source"],
            registry=registry)
        self.items = Counter(
            "bodega_registry_items_sent_total",
            "Rows this node put on gossip, by form: row, zrow (compressed) or notice",
            ["form"], registry=registry)
        self.bad_items = Counter(
            "bodega_registry_bad_items_total", "Row items that did not decode",
            registry=registry)
        self.syncs = Counter(
            "bodega_registry_syncs_total",
            "Anti-entropy pulls by result: ok, error (peer unreachable or bad reply)",
            ["result"], registry=registry)
        self.served = Counter(
            "bodega_registry_syncs_served_total", "Anti-entropy requests this node answered",
            registry=registry)
        self.sync_bytes = Counter(
            "bodega_registry_sync_bytes_total",
            "Anti-entropy bytes by direction (request and reply bodies)", ["direction"],
            registry=registry)
        self.purged = Counter(
            "bodega_registry_tombstones_purged_total", "Tombstones forgotten after their TTL",
            registry=registry)
        self.missing = Gauge(
            "bodega_registry_missing_versions",
            "Versions known to exist but not yet seen here (gaps)", registry=registry)
        self.rows = Gauge("bodega_registry_rows", "Live rows in this replica, by table",
                          ["table"], registry=registry)
        self.subscriptions = Gauge(
            "bodega_registry_subscriptions", "Open subscriptions", registry=registry)
        self.lagged = Counter(
            "bodega_registry_subscriptions_lagged_total",
            "Subscriptions cut off because the consumer fell behind", registry=registry)

    def reject(self, table: str, reason: str) -> None:
        self.rejected.labels(table, reason).inc()

    def observe(self, replica: Replica, subscriptions: int) -> None:
        self.missing.set(sum(replica.missing().values()))
        for table in TABLES:
            self.rows.labels(table).set(replica.view.count(table))
        self.subscriptions.set(subscriptions)
