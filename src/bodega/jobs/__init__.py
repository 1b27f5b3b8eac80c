"""bodega.jobs: the pure rules of bodega's batch jobs (the article's ``/sched`` API).

What a job is (``spec``), a task's life at its home (``tasks``: claims, leases,
releases, retries with backoff (``backoff``), cancels, deadlines), a job over
its tasks (``jobs``: state, which task a claim gets, admission, retention),
where a job lives (``homes``: rendezvous hashing), late binding's reservations
(``binding``) and assignment mode's choice (``assign``). No I/O: the worker
that is a job's home applies these in its transactions, the broker and the
simulator use them to decide.
"""

from bodega.jobs.assign import Offer, Room, choose, free_room, gigabytes
from bodega.jobs.backoff import delay
from bodega.jobs.binding import (
    DEFAULT_RATIO,
    WorkerRoom,
    by_room,
    interleave,
    probes_for,
    spread,
    wanted,
)
from bodega.jobs.homes import job_key, rendezvous
from bodega.jobs.jobs import FINISHED, Finished, JobState, admit, counts, job_state, pick, to_drop
from bodega.jobs.spec import (
    BODEGA_POOL,
    JobSpec,
    check_name,
    check_pool,
    deadline_at,
    machine_config,
    split_command,
    task_config,
    task_env,
)
from bodega.jobs.tasks import (
    TERMINAL,
    Policy,
    Task,
    TaskState,
    Verdict,
    after_restart,
    cancel,
    claim,
    expire,
    lapse,
    release,
    renew,
)

__all__ = [
    "BODEGA_POOL",
    "DEFAULT_RATIO",
    "FINISHED",
    "TERMINAL",
    "Finished",
    "JobSpec",
    "JobState",
    "Offer",
    "Policy",
    "Room",
    "Task",
    "TaskState",
    "Verdict",
    "WorkerRoom",
    "admit",
    "after_restart",
    "by_room",
    "cancel",
    "check_name",
    "check_pool",
    "choose",
    "claim",
    "counts",
    "deadline_at",
    "delay",
    "expire",
    "free_room",
    "gigabytes",
    "interleave",
    "job_key",
    "job_state",
    "lapse",
    "machine_config",
    "pick",
    "probes_for",
    "release",
    "rendezvous",
    "renew",
    "split_command",
    "spread",
    "task_config",
    "task_env",
    "to_drop",
    "wanted",
]
