"""The figures' bench at a tiny size: every machine's series read from real processes'
/proc files, and the proxy's from a show stat answer of a row per machine."""

from __future__ import annotations

from bench.machines.figures import proxy_look, worker_scrape


def test_the_bench_reads_every_machines_series_at_a_tiny_size() -> None:
    worker = worker_scrape(machines=4, per_machine=2, rounds=2)
    # cpu, memory, peak, limit, io read and written for each (net bytes: where the host's
    # namespace has an eth0).
    assert worker["series"] >= 4 * 6
    assert worker["median_ms"] > 0
    proxy = proxy_look(machines=4, rounds=2)
    # Per machine: 5 status classes, connects, concurrency, average; 5 at the edge.
    assert proxy["series"] == 4 * 8 + 5
