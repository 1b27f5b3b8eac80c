"""A job over its tasks: its state, its counts, which task a claim gets, what is kept.

Pure decisions of the home: a job's state is read from its tasks (never kept
apart from them, so it cannot disagree); a claim gets the lowest-numbered task
that may run now; a full queue refuses a submit (429, never a silent loss);
finished jobs are kept for a TTL and at most ``keep`` per app, the oldest
finished going first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bodega.jobs.tasks import Task, TaskState
from bodega.model.errors import TooManyRequests
from bodega.model.refusals import RetryLater


class JobState(StrEnum):
    WAITING = "waiting"  # for the jobs it runs after to succeed
    SCHEDULED = "scheduled"  # a periodic job: its runs are jobs of their own
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


def job_state(states: Mapping[str, int]) -> JobState:
    """From its tasks' counts by state: running while any task runs; queued while any waits;
    then failed if any failed, cancelled if any was cancelled, else succeeded."""
    for state in (TaskState.RUNNING, TaskState.QUEUED, TaskState.FAILED, TaskState.CANCELLED):
        if states.get(str(state), 0):
            return JobState(str(state))
    return JobState.SUCCEEDED


def counts(tasks: Iterable[Task]) -> dict[str, int]:
    found = dict.fromkeys((str(s) for s in TaskState), 0)
    for task in tasks:
        found[str(task.state)] += 1
    return found


def pick(tasks: Sequence[Task], now: float, count: int = 1,
         only: int | None = None) -> list[Task]:
    """The tasks a claim of up to ``count`` gets: the lowest-numbered that may run now
    (``only``: that task alone)."""
    if only is not None:
        return [t for t in tasks if t.index == only and t.claimable(now)][:1]
    return [t for t in tasks if t.claimable(now)][:count]


def admit(queued: int, adding: int, limit: int) -> None:
    """Refuse a submit that would take the home's queue past ``limit`` tasks (429)."""
    if limit and queued + adding > limit:
        wait = max(1.0, min(30.0, adding / 100))
        raise TooManyRequests(
            f"the job queue is full: {queued} tasks wait here (at most {limit}), this job "
            f"adds {adding}; try again shortly", retry_after=wait,
            status="resource_exhausted", details=RetryLater(retry_after=wait))


@dataclass(frozen=True)
class Finished:
    job_id: str
    app: str
    finished_at: float


def to_drop(finished: Iterable[Finished], now: float, ttl: float, keep: int) -> list[str]:
    """Finished jobs past the TTL, and beyond the ``keep`` newest of each app."""
    drop: list[str] = []
    by_app: dict[str, list[Finished]] = defaultdict(list)
    for job in finished:
        if now - job.finished_at > ttl:
            drop.append(job.job_id)
        else:
            by_app[job.app].append(job)
    for jobs in by_app.values():
        jobs.sort(key=lambda j: (j.finished_at, j.job_id), reverse=True)
        drop.extend(j.job_id for j in jobs[keep:])
    return drop
