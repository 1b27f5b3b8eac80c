"""A home's periodic jobs, fired: the upkeep asks on each tick, ``jobs/periodic.py`` decides.

For each schedule not cancelled: the fires due by the scheduler's clock (``JobHome.calendar``)
are read from the cron expression in its time zone; the latest launches a run (a job of its
own on this home, committed with the schedule's new position in one transaction), unless
the last run is still going, when the job's overlap policy skips it, queues it or cancels
the last run first. A queued fire launches once the last run ends. A full queue (429) skips
the fire, said in the log: the schedule never stops for it.

The schedule lives in the home's store (``periodic``): a home killed and restarted goes on
from its next fire; fires missed while it was down are counted as skipped and the latest is
launched, once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bodega.jobs.periodic import Action, due, on_fire, release_pending
from bodega.model.errors import TooManyRequests
from bodega.model.machine import rfc3339
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.store import JobRow, PeriodicRow

log = logging.getLogger("bodega.worker.jobs")


def calendar(clock_file: Path | None) -> Callable[[], float]:
    """The clock periodic jobs fire by: the wall clock, or the epoch seconds a test writes
    to ``clock_file`` (the wall clock while the file is missing or half written)."""
    if clock_file is None:
        return time.time
    path = clock_file

    def read() -> float:
        try:
            return float(path.read_text().strip())
        except (OSError, ValueError):
            return time.time()
    return read


class JobSchedules:
    def __init__(self, home: JobHome) -> None:
        self.home = home
        self.store = home.store

    def tick(self) -> None:
        at = self.home.calendar()
        for row in self.store.schedules():
            job = self.store.job(row.job_id)
            if job is None or job.spec.periodic is None:
                continue
            self.home.checked[job.id] = at
            self._step(job, row, at)

    def _step(self, job: JobRow, row: PeriodicRow, at: float) -> None:
        assert job.spec.periodic is not None
        last = self.store.job(row.last_run) if row.last_run else None
        going = last is not None and last.finished_at is None
        fire = due(job.spec.periodic, row.next_at, at)
        after = replace(row, next_at=fire.next_at, skipped=row.skipped + fire.missed)
        if fire.fire is None:
            if release_pending(len(row.pending), going):
                self._launch(job, row.pending[0], replace(after, pending=row.pending[1:]))
            return
        if fire.missed:
            log.info("job %s: %d fire(s) missed (the home was down or its clock jumped); "
                     "running the latest", job.name, fire.missed)
        action = on_fire(job.spec.periodic.overlap, going, len(row.pending))
        if action is Action.SKIP:
            log.info("job %s: the fire for %s skipped: run %s still goes", job.name,
                     rfc3339(fire.fire), last.name if last else "?")
            self.home.record(replace(after, skipped=after.skipped + 1))
        elif action is Action.QUEUE:
            self.home.record(replace(after, pending=(*row.pending, fire.fire)))
        else:
            if action is Action.REPLACE and last is not None:
                log.info("job %s: cancelling run %s for the fire at %s", job.name, last.name,
                         rfc3339(fire.fire))
                self.home.cancel(last.id)
            self._launch(job, fire.fire, after)

    def _launch(self, job: JobRow, fire: float, after: PeriodicRow) -> None:
        try:
            self.home.launch(job, fire, after)
        except TooManyRequests as exc:
            log.warning("job %s: the fire for %s skipped: %s", job.name, rfc3339(fire),
                        exc.message)
            self.home.record(replace(after, skipped=after.skipped + 1))
