"""A job as its home keeps it: what to run, how many times, and the rules of its retries.

Two shapes come in (``wire/public/jobs/api.py`` reads them): the article's own
(``{"Name": "frick", "Command": "sleep 1", "Restart": true}``) and a richer one
(a machine config, ``count``, resources, ``max_attempts``, ``deadline``,
``idempotency_key``). Both become one ``JobSpec``. A command given as a string
is split as a shell would split it (``shlex``: quotes and backslashes) and is
never run through a shell: ``"echo $HOME; rm -rf /"`` runs ``echo`` with the
three words as its arguments.

Each task of a ``bodega``-pool job runs as a machine (``task_config``): the
job's config with ``auto_destroy`` and restart ``no`` (a failed attempt is
retried by the job's rules, on any worker, never restarted in place), and the
job, task and attempt in its metadata and its environment (``task_env``).
"""

from __future__ import annotations

import re
import shlex
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from bodega.jobs.periodic import NAME_ROOM, Periodic
from bodega.model.capacity import Ask
from bodega.model.machine_config import Guest, Init, MachineConfig, Restart

BODEGA_POOL = "bodega"  # run by bodega's own workers; every other pool by external ones
PROCESS_IMAGE = "process"  # the image recorded for a command the process driver runs
MAX_COUNT = 10_000
MAX_AFTER = 20
JOB_NAME_MAX = 100
JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")
POOL_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}\Z")
# Task metadata: a machine says which job, task and attempt it runs.
JOB_KEY, TASK_KEY, ATTEMPT_KEY = "bodega_job", "bodega_task", "bodega_attempt"


class JobSpec(BaseModel):
    """A submitted job, normalized; stored by its home as JSON and never changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    app: str = Field(min_length=1, max_length=63)
    name: str
    pool: str = BODEGA_POOL
    command: tuple[str, ...] = ()
    config: MachineConfig
    count: int = Field(default=1, ge=1, le=MAX_COUNT)
    max_attempts: int = Field(default=3, ge=0, le=10_000)  # 0: no limit but the deadline
    backoff: float = Field(default=1.0, ge=0, le=3600)  # seconds after the first failure
    backoff_cap: float = Field(default=60.0, ge=0, le=86_400)
    lease_seconds: float = Field(default=30.0, ge=1, le=3600)
    grace_seconds: float = Field(default=5.0, ge=0, le=300)  # SIGTERM, then SIGKILL after it
    deadline_at: float | None = None  # epoch seconds; queued then fails, running is stopped
    idempotency_key: str | None = Field(default=None, max_length=256)
    region: str | None = None  # where bodega-pool tasks may run (a region expression)
    after: tuple[str, ...] = ()  # jobs of its app that must succeed before it runs
    periodic: Periodic | None = None  # a template: its home launches a run each fire
    parent: str | None = None  # a run of a periodic job: that job's name
    fire_at: float | None = None  # ... and the fire it runs for (epoch seconds)

    def ask(self) -> Ask:
        """What one task needs of a worker."""
        return Ask.for_config(self.config)


def split_command(command: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """A command line as argv, split as a shell would (never run by one); a list is kept."""
    if isinstance(command, list | tuple):
        argv = tuple(str(part) for part in command)
    else:
        try:
            argv = tuple(shlex.split(command))
        except ValueError as exc:  # an unbalanced quote
            raise ValueError(f"command {command!r}: {exc}") from None
    if not argv or not argv[0]:
        raise ValueError("command is empty")
    return argv


def machine_config(command: tuple[str, ...], config: MachineConfig | None, *,
                   cpus: int | None = None, memory_mb: int | None = None,
                   cpu_kind: str | None = None,
                   env: dict[str, str] | None = None) -> MachineConfig:
    """The config every task runs with: the given one (or a process-driver one), the command
    as its ``init.exec``, resources and env laid over it."""
    base = config.model_copy(deep=True) if config is not None else \
        MachineConfig(image=PROCESS_IMAGE)
    if command:
        base.init = (base.init or Init()).model_copy(update={"exec": list(command)})
    if cpus is not None or memory_mb is not None or cpu_kind is not None:
        guest = base.effective_guest()
        base.guest = Guest.model_validate({
            **guest.model_dump(exclude_none=True),
            **({"cpus": cpus} if cpus is not None else {}),
            **({"memory_mb": memory_mb} if memory_mb is not None else {}),
            **({"cpu_kind": cpu_kind} if cpu_kind is not None else {}),
        })
    if env:
        base.env = {**(base.env or {}), **env}
    if base.command() is None:
        raise ValueError("a job needs a command (Command, or config.init.exec)")
    return base


def task_config(spec: JobSpec, job_id: str, task: int, attempt: int) -> MachineConfig:
    """The machine one attempt of one task runs as: destroyed when it ends, never restarted.

    A shallow copy, made once per task a home gives out: the parts it shares with the
    job's config are never changed in place (the job's spec is frozen, and this config is
    only sent), and a deep copy cost a home a third of its time in a take."""
    base = spec.config
    return base.model_copy(update={
        "auto_destroy": True,
        "restart": Restart(policy="no"),
        "services": None,  # a task serves nothing: the proxy never routes to it
        "metadata": {**(base.metadata or {}), JOB_KEY: job_id, TASK_KEY: str(task),
                     ATTEMPT_KEY: str(attempt)},
        "env": {**(base.env or {}), **task_env(spec, job_id, task, attempt)}})


def task_env(spec: JobSpec, job_id: str, task: int, attempt: int) -> dict[str, str]:
    """What a task's program is told of itself: which slice of the work is its own (an array
    job's index, as Batch and Kubernetes indexed jobs give it) and which try this is."""
    return {"BODEGA_JOB": job_id, "BODEGA_JOB_NAME": spec.name, "BODEGA_TASK": str(task),
            "BODEGA_TASK_COUNT": str(spec.count), "BODEGA_ATTEMPT": str(attempt)}


def deadline_at(deadline: float | str | None, now: float) -> float | None:
    """A deadline as epoch seconds: a number is seconds from ``now``, a string an RFC 3339
    time."""
    if deadline is None:
        return None
    if isinstance(deadline, int | float):
        if deadline <= 0:
            raise ValueError("deadline must be positive (seconds from now) or an RFC 3339 time")
        return now + float(deadline)
    try:
        parsed = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"deadline {deadline!r}: not an RFC 3339 time") from None
    if parsed.tzinfo is None:
        raise ValueError(f"deadline {deadline!r}: give a time zone (Z or +hh:mm)")
    return parsed.timestamp()


def check_name(name: str) -> str:
    if not JOB_NAME_RE.match(name):
        raise ValueError(f"job name {name!r}: use letters, digits, '_', '.' and '-', "
                         "starting with a letter or digit, at most 100")
    return name


def check_after(name: str, after: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The jobs a job runs after: names of its app, each once, never itself."""
    if len(after) > MAX_AFTER:
        raise ValueError(f"after: at most {MAX_AFTER} jobs")
    for other in after:
        check_name(other)
    if name in after:
        raise ValueError(f"after: job {name} cannot run after itself")
    return tuple(dict.fromkeys(after))


def check_periodic(name: str, periodic: Periodic) -> Periodic:
    if len(name) > JOB_NAME_MAX - NAME_ROOM:
        raise ValueError(f"job name {name!r}: a periodic job's name is at most "
                         f"{JOB_NAME_MAX - NAME_ROOM} characters (each run adds the time "
                         "it fired for)")
    return periodic


def run_spec(spec: JobSpec, name: str, fire: float, now: float) -> JobSpec:
    """One run of a periodic job: the job as a plain one, named for its fire."""
    every = spec.periodic
    return spec.model_copy(update={
        "name": name, "periodic": None, "parent": spec.name, "fire_at": fire,
        "idempotency_key": None,
        "deadline_at": None if every is None or every.run_seconds is None
        else now + every.run_seconds})


def check_pool(pool: str) -> str:
    if not POOL_RE.match(pool):
        raise ValueError(f"pool {pool!r}: use lowercase letters, digits, '_' and '-'")
    return pool
