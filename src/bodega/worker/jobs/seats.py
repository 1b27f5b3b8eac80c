"""A home's own warm slots, offered to a one-task job within its submit's transaction.

``bodega.jobs.seats`` says when and which slot; this records the run in it in the
submit's transaction (``seat``) and, once that transaction is committed, holds the slot
and writes the task's line (``start``): one commit for the job, its task claimed by this
worker and the run, and nothing sent to any other worker. A submit that finds no free
slot here is committed queued, its probes finding it room as before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from bodega.jobs.slots import eligible, slot_key
from bodega.jobs.spec import task_config
from bodega.jobs.tasks import Task
from bodega.worker.jobs.run_store import RunRow, RunStore
from bodega.worker.jobs.slots import Slot, SlotPool
from bodega.worker.jobs.store import JobRow


@dataclass(frozen=True)
class Seated:
    """A run recorded in a slot, not yet started (its transaction may still roll back)."""

    slot: Slot
    run: RunRow

    @property
    def machine_id(self) -> str:
        return self.run.machine_id or ""


class SubmitSeats:
    def __init__(self, runs: RunStore, slots: SlotPool, name: str,
                 leased: Callable[[RunRow], None] = lambda run: None) -> None:
        """``leased``: told of each run started, its lease given and its machine known at
        its home (this worker) as of its start: the runs' watch renews it from then on."""
        self.runs = runs
        self.slots = slots
        self.name = name
        self.leased = leased
        self.started = 0  # tasks started at their submit (the worker's /metrics counts them)

    def seat(self, conn: sqlite3.Connection, job: JobRow, task: Task,
             now: float) -> Seated | None:
        """Record ``task`` (claimed by this worker) running in a free slot of its shape, in
        the caller's transaction; None when no slot here is free for it."""
        config = task_config(job.spec, job.id, task.index, task.attempts)
        if not eligible(config):
            return None
        slot = self.slots.free(slot_key(job.spec.app, config))
        if slot is None or slot.machine_id is None:
            return None
        run = self.runs.seated(conn, RunRow(
            job_id=job.id, index=task.index, attempt=task.attempts, home=self.name,
            app=job.spec.app, config=config, lease_seconds=job.spec.lease_seconds,
            grace_seconds=job.spec.grace_seconds, machine_id=slot.machine_id,
            state="running", stop=None, exit_code=None, reason=None, updated_at=now))
        return Seated(slot, run)

    def start(self, seated: Seated) -> None:
        """Once committed: the slot holds the run and is given its line."""
        self.runs.remember(seated.run)
        self.slots.seated(seated.slot, seated.run)
        self.leased(seated.run)
        self.started += 1
