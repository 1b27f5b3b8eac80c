"""What a home tells the cluster of its jobs: one row per job in the registry's ``jobs`` table.

The row is the job's ``JobStatus`` (its state, counts, the running tasks and
who holds them; the task list itself only for jobs of at most ``VIEW_TASKS``
tasks), owned by this worker: brokers list jobs, find a job's home and answer
``/sched/jobs`` and ``/sched/cancellations`` from it. The home marks a job
when it changes; ``interval`` after the first mark the marked ones are
published once each, so a job that is claimed and released within one interval
is written once (and a home with no job changing does nothing); while jobs keep
changing, a round follows the last by ``BUSY_INTERVAL`` at least, so a job whose
tasks run through by the hundred is written twice a second, not twenty times. On
start every job is published and rows this worker no longer has are deleted.
The view is a cache: the home's store is the truth (a status asks the home).
"""

from __future__ import annotations

import asyncio
import logging

from bodega.registry import Registry
from bodega.wire.jobs.api import VIEW_TASKS
from bodega.worker.jobs.home import JobHome

log = logging.getLogger("bodega.worker.jobs")

INTERVAL = 0.05  # seconds from a first change to its publish
BUSY_INTERVAL = 0.5  # seconds between publishes while jobs keep changing


class JobPublisher:
    def __init__(self, node: Registry, home: JobHome, interval: float = INTERVAL) -> None:
        self.node = node
        self.home = home
        self.interval = interval
        self.dirty: set[str] = set()
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
        self.flush()

    def flush(self) -> None:
        while self.dirty:
            job_id = self.dirty.pop()
            try:
                self._publish(job_id)
            except Exception:
                self.dirty.add(job_id)  # the next round tries again
                raise

    def _publish(self, job_id: str) -> None:
        job = self.home.store.job(job_id)
        if job is None:
            if self.node.get("jobs", job_id) is not None:
                self.node.delete_owned("jobs", job_id)
            return
        status = self.home.status(job, tasks=job.spec.count <= VIEW_TASKS)
        self.node.put_owned("jobs", job_id, status.doc())

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        flushed = -BUSY_INTERVAL
        while True:
            await self._marked.wait()
            # What else changes meanwhile goes too: ``interval`` after a quiet spell, and
            # while jobs keep changing (a job's tasks running through), no sooner than
            # ``BUSY_INTERVAL`` after the last round: every row is gossiped to every host.
            await asyncio.sleep(max(self.interval, flushed + BUSY_INTERVAL - loop.time()))
            flushed = loop.time()
            self._marked.clear()
            if not self.dirty:
                continue
            try:
                self.flush()
            except Exception:
                log.exception("publishing jobs failed")
                self._marked.set()  # what failed is still marked: the next round tries again
