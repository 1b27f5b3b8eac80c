"""A home's jobs that run after others: freed when those succeed, failed when one will not.

About once a second the upkeep reads, for each waiting job, the state of every job it still
waits for: from this home's store when it is home to that job too (the truth), else from
the registry view (the job's row, published by its home), else from that job's home,
asked (``look_up``): a job that ended before its home's first publish is kept only
there. ``jobs/depends.py`` decides; a
job freed gets its probes from the upkeep's top-up like any queued job, a job failed ends
with every task failed and the reason naming the job that failed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from bodega.jobs.depends import gate
from bodega.jobs.jobs import FINISHED
from bodega.jobs.tasks import unmet
from bodega.worker.jobs.home import JobHome

log = logging.getLogger("bodega.worker.jobs")

EVERY = 1.0


class JobWaits:
    def __init__(self, home: JobHome, viewed: Callable[[str, str], str | None],
                 ask: Callable[[str, str], Awaitable[str | None]] | None = None) -> None:
        """``viewed(app, name)``: the state of that job in the registry view, or None;
        ``ask(app, name)``: its state as its home says, or None."""
        self.home = home
        self.store = home.store
        self.viewed = viewed
        self.ask = ask
        self.asked: dict[tuple[str, str], str] = {}  # finished jobs only their homes keep
        self._next = self._next_look = 0.0

    def _known(self, app: str, name: str) -> str | None:
        return self.store.state_named(app, name) or self.viewed(app, name) \
            or self.asked.get((app, name))

    async def look_up(self, now: float) -> None:
        """Ask the homes of the jobs waited for that neither this store nor the view knows
        (about once a second); a finished one's state is kept while a job waits for it."""
        if self.ask is None or now < self._next_look:
            return
        self._next_look = now + EVERY
        wanted = {(job.app, name) for job in self.store.waiting_jobs()
                  for name in job.waiting or ()}
        self.asked = {key: state for key, state in self.asked.items() if key in wanted}
        for app, name in wanted - self.asked.keys():
            if self._known(app, name) is None:
                state = await self.ask(app, name)
                if state in FINISHED:
                    self.asked[(app, name)] = state

    def tick(self, now: float, *, force: bool = False) -> None:
        if now < self._next and not force:
            return
        self._next = now + EVERY
        for job in self.store.waiting_jobs():
            names = job.waiting or ()
            states = {n: self._known(job.app, n) for n in names}
            verdict = gate(names, states, now - job.created_at)
            if verdict.open:
                with self.store.tx() as conn:
                    self.store.set_waiting(conn, job.id, None)
                    self.home.apply(conn, replace(job, waiting=None), [], now)
                log.info("job %s: the jobs it runs after succeeded; its tasks may run",
                         job.name)
            elif verdict.failed is not None:
                with self.store.tx() as conn:
                    self.store.set_waiting(conn, job.id, None)
                    tasks = [unmet(t, now, verdict.failed) for t in self.store.tasks(conn, job.id)]
                    self.home.apply(conn, replace(job, waiting=None), tasks, now)
                log.info("job %s failed: %s", job.name, verdict.failed)
            elif verdict.waiting != names:
                with self.store.tx() as conn:
                    self.store.set_waiting(conn, job.id, verdict.waiting)
            else:
                continue
            self.home.changed(job.id)
