"""A job and its tasks as the ``/sched`` API shows them (``wire/public/jobs/api.py``).

The home answers with these, and its publisher writes the same ``JobStatus``
as the job's row in the registry view (with its task list only for jobs of at
most ``VIEW_TASKS`` tasks; the running ones are always there, as ``held``).
"""

from __future__ import annotations

from collections.abc import Sequence

from bodega.jobs.spec import JobSpec, task_config, task_env
from bodega.jobs.tasks import Task, TaskState
from bodega.model.machine import rfc3339
from bodega.wire.public.jobs.api import ClaimAnswer, HeldTask, JobStatus, PeriodicStatus, TaskStatus
from bodega.worker.jobs.store import JobRow, PeriodicRow


def _time(at: float | None) -> str | None:
    return None if at is None else rfc3339(at)


def task_status(task: Task, now: float) -> TaskStatus:
    return TaskStatus(
        index=task.index, state=str(task.state), attempts=task.attempts,
        exit_codes=list(task.exit_codes), worker=task.claimant, machine_id=task.machine_id,
        lease_expires_at=_time(task.lease_expires_at),
        eligible_at=_time(task.eligible_at) if task.state is TaskState.QUEUED
        and task.eligible_at > now else None,
        started_at=_time(task.started_at), ended_at=_time(task.ended_at),
        stopping=task.stopping, reason=task.reason or None)


def held_task(task: Task) -> HeldTask:
    return HeldTask(index=task.index, worker=task.claimant or "", attempt=task.attempts,
                    stopping=task.stopping, machine_id=task.machine_id)


def periodic_status(spec: JobSpec, row: PeriodicRow, last: JobRow | None,
                    checked_at: float | None) -> PeriodicStatus | None:
    if spec.periodic is None:
        return None
    return PeriodicStatus(
        cron=spec.periodic.cron, time_zone=spec.periodic.time_zone,
        overlap=spec.periodic.overlap, next_run_at=rfc3339(row.next_at),
        checked_at=_time(checked_at), launched=row.launched, skipped=row.skipped,
        pending=len(row.pending), last_run=None if last is None else last.name,
        last_run_state=None if last is None else str(last.state))


def job_status(job: JobRow, home: str, states: dict[str, int], running: Sequence[Task],
               tasks: Sequence[Task] | None, now: float, *,
               periodic: PeriodicStatus | None = None) -> JobStatus:
    spec = job.spec
    guest = spec.config.effective_guest()
    return JobStatus(
        id=job.id, name=spec.name, app=spec.app, pool=spec.pool, state=str(job.state),
        home=home, count=spec.count, counts=states, command=list(spec.command),
        cpus=guest.cpus, memory_mb=guest.memory_mb, max_attempts=spec.max_attempts,
        created_at=rfc3339(job.created_at), updated_at=rfc3339(job.updated_at),
        finished_at=_time(job.finished_at), deadline_at=_time(spec.deadline_at),
        idempotency_key=spec.idempotency_key,
        held=[held_task(t) for t in running],
        tasks=None if tasks is None else [task_status(t, now) for t in tasks],
        after=list(spec.after), waiting_for=list(job.waiting or ()), periodic=periodic,
        parent=spec.parent, fire_at=_time(spec.fire_at))


def claimed(job: JobRow, task: Task, worker: str, bodega_pool: bool) -> ClaimAnswer:
    """What a claimant gets: the task, its lease, and what to run."""
    spec = job.spec
    config = task_config(spec, job.id, task.index, task.attempts) if bodega_pool \
        else spec.config
    return ClaimAnswer(
        job=job.id, name=spec.name, app=spec.app, pool=spec.pool, task=task.index,
        attempt=task.attempts, worker=worker,
        lease_expires_at=rfc3339(task.lease_expires_at or 0.0),
        lease_seconds=spec.lease_seconds, grace_seconds=spec.grace_seconds,
        command=list(spec.command), config=config,
        env={**(spec.config.env or {}), **task_env(spec, job.id, task.index, task.attempts)},
        stopping=task.stopping)


__all__ = ["claimed", "held_task", "job_status", "periodic_status", "task_status"]
