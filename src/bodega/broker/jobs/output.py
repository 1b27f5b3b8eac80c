"""What a job's tasks printed, read from the workers that ran them.

A task's output stays on the worker that ran it (``worker/jobs/output.py``), not at the
job's home: ``GET /sched/logs/{name}?task=N`` reads it all from there, and a status shows
each task's last lines (``?lines=N``, default ``STATUS_LINES``), read from the end of
its output on its worker (``jobs/tail.py``) for the first ``TAILS`` tasks that ran, all
at once. A worker that does not answer within ``TAIL_WAIT`` costs the status only that
task's lines: the status is the home's, and it is answered whatever the output does.
Tasks of external pools have no output here.
"""

from __future__ import annotations

import asyncio
import contextlib

from bodega.broker.jobs.desk import JobDesk, home_down
from bodega.jobs.spec import BODEGA_POOL
from bodega.jobs.tail import tail
from bodega.model.errors import BodegaError, NotFound, Unavailable
from bodega.runtime.waits import within
from bodega.wire.public.jobs.api import JobStatus, TaskStatus

STATUS_LINES = 10  # a status's last lines per task, unless ?lines= says
TAILS = 8  # tasks whose last lines a status reads
TAIL_WAIT = 1.0  # seconds a status waits for a task's worker


async def task_logs(desk: JobDesk, app: str, name: str, task: int) -> bytes:
    status = await desk.status(app, name)
    found = next((t for t in status.tasks or [] if t.index == task), None)
    if found is None:
        raise NotFound(f"job {name} has no task {task}")
    if found.worker is None:
        raise NotFound(f"job {name} task {task} has not run yet")
    if status.pool != BODEGA_POOL:
        raise NotFound(f"job {name} runs on external workers ({found.worker}): bodega "
                       "keeps no output of theirs")
    try:
        return await desk.home(found.worker).task_logs(status.id, task)
    except Unavailable as exc:
        raise home_down(found.worker, exc) from exc


async def with_output(desk: JobDesk, job: JobStatus, lines: int) -> JobStatus:
    """``job`` with the last ``lines`` lines of each task that ran (the first ``TAILS``)."""
    if lines <= 0 or job.pool != BODEGA_POOL or not job.tasks:
        return job
    ran = [t for t in job.tasks if t.worker is not None and t.started_at][:TAILS]

    async def last_lines(task: TaskStatus) -> TaskStatus:
        assert task.worker is not None
        with contextlib.suppress(BodegaError, TimeoutError):
            data = await within(
                desk.home(task.worker).task_logs(job.id, task.index, tail=True), TAIL_WAIT)
            return task.model_copy(update={"output": tail(data, lines)})
        return task

    read = {t.index: t for t in await asyncio.gather(*(last_lines(t) for t in ran))}
    return job.model_copy(update={"tasks": [read.get(t.index, t) for t in job.tasks]})
