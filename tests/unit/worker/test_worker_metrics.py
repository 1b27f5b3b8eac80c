"""The worker's counts kept elsewhere and added to its metrics when scraped."""

from __future__ import annotations

from prometheus_client import generate_latest

from bodega.worker.metrics import WorkerMetrics


def test_starts_at_submit_are_added_as_they_grow_between_scrapes() -> None:
    metrics = WorkerMetrics()
    for started in (2, 2, 5):  # the home's running count, read at each scrape
        metrics.observe_starts_at_submit(started)
    assert b"bodega_worker_job_starts_at_submit_total 5.0" in generate_latest(metrics.registry)
