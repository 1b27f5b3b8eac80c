"""The jobs a broker's view holds, indexed for the ``/sched`` reads (pure).

Fed with each job's row as its home publishes it (``JobStatus``), it answers
what external workers poll (queued jobs of a pool, the tasks a worker holds
that are to stop) and where a job lives (its home, by app and name) without
reading every row of the view on each poll. A cache like the view it comes
from: a claim, a status or a cancel always goes to the job's home.

The view lags a claim by the home's publish and a gossip round, and external
workers poll far more often than that: a job whose one task was just claimed
through this broker would be listed as queued to every poller until its row
came back, and each would claim it in vain (409). So the index also keeps what
this broker has heard from homes since each job's row: a claim won takes one
task off the row's queued count, a claim refused with nothing left takes them
all, until a newer row of the job comes and says for itself; and a claim still
on its way to the home takes one off while it is.
"""

from __future__ import annotations

from collections.abc import Iterable

from bodega.jobs.homes import job_key, rendezvous
from bodega.wire.public.jobs.api import HeldTask, JobStatus


class JobIndex:
    def __init__(self) -> None:
        self.jobs: dict[str, JobStatus] = {}
        self._by_name: dict[tuple[str, str], str] = {}
        self._by_key: dict[tuple[str, str], str] = {}
        # job id -> (the row's updated_at when heard, its queued tasks claimed since then)
        self._claimed: dict[str, tuple[str, int]] = {}
        self._claiming: dict[str, int] = {}  # job id -> claims sent to its home, unanswered

    def note(self, job: JobStatus) -> None:
        earlier = self.jobs.get(job.id)
        if earlier is not None and earlier.updated_at > job.updated_at:
            return  # a row older than one already seen (this broker's own read of the home)
        if earlier is not None:
            self._unlink(earlier)
        heard = self._claimed.get(job.id)
        if heard is not None and heard[0] < job.updated_at:  # the row now says for itself
            del self._claimed[job.id]
        self.jobs[job.id] = job
        self._by_name[(job.app, job.name)] = job.id
        if job.idempotency_key:
            self._by_key[(job.app, job.idempotency_key)] = job.id

    def forget(self, job_id: str) -> None:
        job = self.jobs.pop(job_id, None)
        self._claimed.pop(job_id, None)
        if job is not None:
            self._unlink(job)

    def _unlink(self, job: JobStatus) -> None:
        if self._by_name.get((job.app, job.name)) == job.id:
            del self._by_name[(job.app, job.name)]
        if job.idempotency_key and self._by_key.get((job.app, job.idempotency_key)) == job.id:
            del self._by_key[(job.app, job.idempotency_key)]

    def named(self, app: str, name: str) -> JobStatus | None:
        job_id = self._by_name.get((app, name))
        return None if job_id is None else self.jobs.get(job_id)

    def keyed(self, app: str, key: str) -> JobStatus | None:
        job_id = self._by_key.get((app, key))
        return None if job_id is None else self.jobs.get(job_id)

    def submit_homes(self, app: str, name: str, key: str | None,
                     live: Iterable[str]) -> list[str]:
        """Where a submit goes, in order: the home of the job its idempotency key (else its
        name) already made, which decides (that job again, or 409 ``name_taken``); else the
        rendezvous order of its name. The key first: a retry that changed or dropped the name
        still reaches the one home that can find the key."""
        known = (self.keyed(app, key) if key else None) or self.named(app, name)
        return [known.home] if known is not None else rendezvous(job_key(app, name), live)

    def apps_naming(self, name: str, apps: Iterable[str] | None = None) -> list[str]:
        """The apps that have a job called ``name`` (among ``apps``, if given)."""
        allowed = None if apps is None else set(apps)
        return sorted(app for app, job_name in self._by_name
                      if job_name == name and (allowed is None or app in allowed))

    def claiming(self, job_id: str, sent: bool = True) -> None:
        """A claim of the job was sent to its home (``sent``), or its answer came."""
        left = self._claiming.get(job_id, 0) + (1 if sent else -1)
        if left > 0:
            self._claiming[job_id] = left
        else:
            self._claiming.pop(job_id, None)

    def claimed(self, job_id: str, *, none_left: bool = False) -> None:
        """A claim of the job was answered by its home: won (one queued task fewer), or
        refused with no task left to claim (``none_left``: none queued), as of now; the
        next newer row of the job replaces what is heard here."""
        job = self.jobs.get(job_id)
        if job is None:
            return
        queued = job.counts.get("queued", 0)
        stamp, taken = self._claimed.get(job_id, (job.updated_at, 0))
        if stamp != job.updated_at:
            taken = 0
        self._claimed[job_id] = (job.updated_at, queued if none_left else min(queued, taken + 1))

    def queued(self, job: JobStatus) -> int:
        """The job's queued tasks: its row's count, less those claimed since it was heard and
        those a claim is on its way to."""
        stamp, taken = self._claimed.get(job.id, (job.updated_at, 0))
        return (job.counts.get("queued", 0) - (taken if stamp == job.updated_at else 0)
                - self._claiming.get(job.id, 0))

    def listing(self, *, app: str | None = None, pool: str | None = None,
                queued_only: bool = False, state: str | None = None) -> list[JobStatus]:
        return [job for job in self.jobs.values()
                if (app is None or job.app == app) and (pool is None or job.pool == pool)
                and (not queued_only or (self.queued(job) > 0 and not job.waiting_for))
                and (state is None or job.state == state)]

    def held_by(self, worker: str, app: str | None = None) -> list[tuple[JobStatus, HeldTask]]:
        return [(job, held) for job in self.jobs.values()
                if app is None or job.app == app
                for held in job.held if held.worker == worker]
