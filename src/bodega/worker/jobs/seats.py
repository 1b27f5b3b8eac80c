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

SHAPES_KEPT = 10_000  # jobs whose slot shape is remembered (all forgotten past it)


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
        # Job -> the shape of its tasks' slot (None: they run in none), worked out once: a
        # queued job is offered every slot that frees until one takes it.
        self._shapes: dict[str, str | None] = {}

    def shape(self, job: JobRow) -> str | None:
        """The slot shape (``slot_key``) of ``job``'s tasks; None when they run in no slot
        (not ``eligible``). A job's spec never changes, so this is worked out once a job."""
        if job.id not in self._shapes:
            if len(self._shapes) >= SHAPES_KEPT:
                self._shapes.clear()
            config = task_config(job.spec, job.id, 0, 1)
            self._shapes[job.id] = slot_key(job.spec.app, config) if eligible(config) else None
        return self._shapes[job.id]

    def may_seat(self, job: JobRow, full: set[str]) -> bool:
        """Whether a free slot may be found for ``job``: its tasks run in one, of a shape
        not in ``full`` (those found with no free slot a moment ago)."""
        shape = self.shape(job)
        return shape is not None and shape not in full

    def seat(self, conn: sqlite3.Connection, job: JobRow, task: Task, now: float,
             full: set[str] | None = None) -> Seated | None:
        """Record ``task`` (claimed by this worker) running in a free slot of its shape, in
        the caller's transaction; None when no slot here is free for it (its shape then
        added to ``full``, if given)."""
        shape = self.shape(job)
        if shape is None:
            return None
        slot = self.slots.free(shape)
        if slot is None or slot.machine_id is None:
            if full is not None:
                full.add(shape)
            return None
        config = task_config(job.spec, job.id, task.index, task.attempts)
        if not eligible(config):  # a longer attempt number took its line past PIPE_BUF
            return None
        self._shapes.pop(job.id, None)
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
