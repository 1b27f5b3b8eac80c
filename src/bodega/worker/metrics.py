"""The worker's Prometheus metrics, in a registry of its own: workers may share a process."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from bodega.model.capacity import Totals, Usage
from bodega.model.states import MachineState


class WorkerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.steps = Histogram(
            "bodega_worker_step_seconds", "Time spent in each operation step's side effect",
            ["fsm", "step"], registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.reservations = Counter(
            "bodega_worker_reservations_total", "Reservation requests by result",
            ["result"], registry=self.registry,
        )
        self.exits = Counter(
            "bodega_worker_machine_exits_total", "Machine processes that ended on their own",
            ["decision"], registry=self.registry,
        )
        self.machines = Gauge(
            "bodega_worker_machines", "Machines on this worker by state", ["state"],
            registry=self.registry,
        )
        self.used = Gauge(
            "bodega_worker_used", "Committed resources (millicpus, memory_mb, disk_gb)",
            ["resource"], registry=self.registry,
        )
        self.total = Gauge(
            "bodega_worker_total", "Configured resources (millicpus, memory_mb, disk_gb)",
            ["resource"], registry=self.registry,
        )
        self.check_runs = Counter(
            "bodega_worker_check_runs_total", "Health-check probes by type and result",
            ["type", "status"], registry=self.registry,
        )
        self.check_seconds = Histogram(
            "bodega_worker_check_seconds", "Time a health-check probe took", ["type"],
            registry=self.registry, buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10),
        )
        self.check_changes = Counter(
            "bodega_worker_check_changes_total",
            "Health checks whose status changed, by new status",
            ["status"], registry=self.registry,
        )
        self.warmup_moves = Counter(
            "bodega_worker_cgroup_warmup_moves",
            "Moves the worker made to ready the kernel's cgroup lock for coming starts",
            registry=self.registry,
        )
        self.starts_at_submit = Counter(
            "bodega_worker_job_starts_at_submit",
            "One-task jobs this worker, their home, started in a warm slot of its own within "
            "their submit's transaction (no probe, no take)", registry=self.registry,
        )
        self._warmup_counted = 0
        self._starts_counted = 0
        self._step_children: dict[tuple[str, str], Any] = {}

    def observe_step(self, fsm: str, step: str, seconds: float) -> None:
        """Time one step (labelled children are kept: the lookup costs more than the count)."""
        child = self._step_children.get((fsm, step))
        if child is None:
            child = self._step_children[(fsm, step)] = self.steps.labels(fsm, step)
        child.observe(seconds)

    def observe_warmup(self, moves: int) -> None:
        """The warm-up's moves so far (its thread counts them; added here when scraped)."""
        self.warmup_moves.inc(moves - self._warmup_counted)
        self._warmup_counted = moves

    def observe_starts_at_submit(self, started: int) -> None:
        """The jobs started at their submit so far (the home counts them; added when
        scraped)."""
        self.starts_at_submit.inc(started - self._starts_counted)
        self._starts_counted = started

    def observe_usage(self, counts: Mapping[str, int], used: Usage,
                      totals: Totals) -> None:
        """Machine counts and capacity, set when scraped rather than on a timer."""
        for state in MachineState:
            self.machines.labels(str(state)).set(counts.get(state, 0))
        for name, value, total in (("millicpus", used.millicpus, totals.millicpus),
                                   ("memory_mb", used.memory_mb, totals.memory_mb),
                                   ("disk_gb", used.disk_gb, totals.disk_gb)):
            self.used.labels(name).set(value)
            self.total.labels(name).set(total)
