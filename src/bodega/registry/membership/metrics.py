"""Membership metrics, in a ``CollectorRegistry`` the caller owns (daemons may share a process)."""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from bodega.registry.membership.core.members import Status
from bodega.registry.membership.core.outputs import SwimStats
from bodega.registry.membership.core.swim import Swim

# SwimStats field -> counter name and help; the state machine counts, we publish.
_STAT_COUNTERS = {
    "probes": "Probes this node started",
    "probe_failures": "Probes that got no ack, direct or indirect",
    "indirect_probes": "Probes that went on to ping-req relays",
    "nacks_sent": "Nacks sent as a relay that heard no ack",
    "suspicions": "Suspicions raised by this node's failed probes",
    "deaths": "Members declared dead by this node's suspicion timers",
    "refutations": "Suspicions about this node that it refuted",
    "rejoins": "Times this node was told it was dead and came back as a new generation",
    "items_delivered": "Broadcast and direct items received for the first time",
}


class MembershipMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.packets = Counter("bodega_gossip_packets_total", "Gossip packets by direction",
                               ["direction"], registry=registry)
        self.bytes = Counter("bodega_gossip_bytes_total", "Gossip bytes by direction",
                             ["direction"], registry=registry)
        self.send_failures = Counter(
            "bodega_gossip_send_failures_total",
            "Packets the socket refused to send (buffer full, unreachable)", registry=registry)
        self.items_evicted = Counter(
            "bodega_gossip_items_evicted_total",
            "Broadcast items dropped from a full queue before their last transmit",
            registry=registry)
        self._evicted = 0
        self.bad_packets = Counter(
            "bodega_gossip_bad_packets_total",
            "Packets dropped: size (oversized), auth (not sealed, bad tag, wrong sender), "
            "unknown_key (sealed with a key not installed), replay (seen before, or from an "
            "earlier life of its sender), decode (malformed), error",
            ["reason"], registry=registry)
        self._stats = {name: Counter(f"bodega_swim_{name}_total", doc, registry=registry)
                       for name, doc in _STAT_COUNTERS.items()}
        self._last = SwimStats()
        self.health = Gauge("bodega_swim_local_health",
                            "Lifeguard local health score (0 healthy, timeouts x score+1)",
                            registry=registry)
        self.members = Gauge("bodega_swim_members", "Known members by status", ["status"],
                             registry=registry)
        self.loop_lag = Histogram(
            "bodega_swim_loop_lag_seconds", "How late the membership tick ran",
            registry=registry, buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5))

    def observe(self, swim: Swim) -> None:
        stats = swim.stats
        for name, counter in self._stats.items():
            delta = getattr(stats, name) - getattr(self._last, name)
            if delta > 0:
                counter.inc(delta)
        self._last = SwimStats(**vars(stats))
        evicted = swim.piggyback.items.dropped - self._evicted
        if evicted > 0:
            self.items_evicted.inc(evicted)
            self._evicted += evicted
        self.health.set(swim.health)
        counts = Tally(m.status for m in swim.members())
        for status in Status:
            self.members.labels(str(status)).set(counts[status])
