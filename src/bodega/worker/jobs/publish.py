"""What a home tells the cluster of its jobs: one row per job in the registry's ``jobs`` table.

The row is the job's ``JobStatus`` (its state, counts, the running tasks and
who holds them; the task list itself only for jobs of at most ``VIEW_TASKS``
tasks), owned by this worker: brokers list jobs, find a job's home and answer
``/sched/jobs`` and ``/sched/cancellations`` from it. The home marks a job
when it changes; ``interval`` after the first mark the marked ones are
published once each, so a job that is claimed and released within one interval
is written once (and a home with no job changing does nothing); those of one round
are written together (``BATCH`` a commit of the registry's store, told on at once).
A job whose state is the one last published (only its counts and running tasks
moved) waits until ``BUSY_INTERVAL`` after that publish, so a job whose tasks run
through by the hundred is written twice a second, not twenty times, while a job that
is claimed, ends or is cancelled shows it within ``interval``. On start every job is
published and rows this worker no longer has are deleted.

A job that ends before its first row is never written. A job already running when its
home first looks (a one-task job of the article's shape, started at its submit in a warm
slot) gets its first row only once it has run ``STARTED_GRACE``, and so does a one-task
job of bodega's pool still queued then (every slot of its shape was busy at its submit:
its home starts it in the first to free, ``JobHome.seat_queued``): most such jobs run for
milliseconds, nothing about them is for the view (no task to claim, no holder to tell of
a cancel), and a row would cost every host a write and every broker a follow, as much as
the job itself. Its home keeps it: a status or cancel by name finds it there (the
rendezvous order), a listing asks the homes (``broker/jobs/desk.py``), and a job that
runs after it asks its home for its state (``waits.py``).

The view is a cache: the home's store is the truth (a status asks the home).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

from bodega.jobs.jobs import JobState
from bodega.jobs.seats import at_submit
from bodega.registry import Registry
from bodega.wire.public.jobs.api import VIEW_TASKS
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.store import JobRow

log = logging.getLogger("bodega.worker.jobs")

INTERVAL = 0.05  # seconds from a first change to its publish
BUSY_INTERVAL = 0.5  # seconds between a job's publishes while only its counts change
BATCH = 64  # rows written in one commit of the registry's store, and handed on at once
STARTED_GRACE = 1.0  # seconds a job started at its submit runs before its first row


class JobPublisher:
    def __init__(self, node: Registry, home: JobHome, interval: float = INTERVAL,
                 busy_interval: float = BUSY_INTERVAL, started_grace: float = STARTED_GRACE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.node = node
        self.home = home
        self.interval = interval
        self.busy_interval = busy_interval
        self.started_grace = started_grace
        self.clock = clock
        self.dirty: set[str] = set()
        self._shown: dict[str, tuple[str, float]] = {}  # job -> state published, and when
        self._marked = asyncio.Event()

    def mark(self, job_id: str) -> None:
        self.dirty.add(job_id)
        self._marked.set()

    def publish_all(self) -> None:
        held = {job.id for job in self.home.store.jobs()}
        for doc in self.node.rows("jobs", home=self.home.name):
            if doc.get("id") not in held:
                self.node.delete_owned("jobs", str(doc["id"]))
        self.dirty |= held
        self.flush(everything=True)

    def flush(self, *, everything: bool = False) -> float | None:
        """Publish the marked jobs whose state changed, and the others last published
        ``busy_interval`` ago or more (``everything``: every marked job); how long until
        the first left marked is due."""
        now = self.clock()
        due: float | None = None
        ready: list[tuple[str, JobRow | None]] = []
        for job_id in list(self.dirty):
            job = self.home.store.job(job_id)
            state, at = self._shown.get(job_id, ("", -math.inf))
            left = 0.0
            if job is not None and str(job.state) == state:
                left = at + self.busy_interval - now
            elif job is not None and job_id not in self._shown and self._unseen_yet(job):
                left = job.created_at + self.started_grace - self.home.clock()
            if left > 0 and not everything:
                due = left if due is None else min(due, left)
                continue
            ready.append((job_id, job))
        for start in range(0, len(ready), BATCH):
            batch = ready[start:start + BATCH]
            with self.node.writes_together():  # a failure keeps the batch marked: retried
                written = [self._publish(job_id, job) for job_id, job in batch]
            for (job_id, job), wrote in zip(batch, written, strict=True):
                self.dirty.discard(job_id)
                if job is None:
                    self._shown.pop(job_id, None)
                elif wrote:
                    self._shown[job_id] = (str(job.state), now)
        return due

    def _unseen_yet(self, job: JobRow) -> bool:
        """Whether a job gets its first row only once it is ``started_grace`` old: one
        running already, or a one-task job of bodega's pool that its home starts itself."""
        return job.state == JobState.RUNNING or (
            job.state == JobState.QUEUED and at_submit(job.spec, self.home.clock()))

    def _publish(self, job_id: str, job: JobRow | None) -> bool:
        """Write the job's row (or delete it, for a job gone); whether a row was written."""
        if job is None:
            if self.node.get("jobs", job_id) is not None:
                self.node.delete_owned("jobs", job_id)
            return False
        if job.finished_at is not None and job_id not in self._shown \
                and self.node.get("jobs", job_id) is None:
            return False  # it ended before the view saw it: only its home keeps it
        status = self.home.status(job, tasks=job.spec.count <= VIEW_TASKS)
        self.node.put_owned("jobs", job_id, status.doc())
        return True

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._marked.wait()
            await asyncio.sleep(self.interval)  # what else changes meanwhile goes too
            self._marked.clear()
            if not self.dirty:
                continue
            try:
                due = self.flush()
            except Exception:
                log.exception("publishing jobs failed")
                self._marked.set()  # what failed is still marked: the next round tries again
                continue
            if due is not None:  # a job kept back: its round comes when it is due
                loop.call_later(max(0.0, due - self.interval), self._marked.set)
