"""The ``/sched`` API on the wire: what users and external workers send, and what comes back.

Requests forbid unknown fields (a misspelled one is a 400 naming it); answers
ignore them (``model/answer.py``). A submit takes the article's shape
(``{"Name": "frick", "Command": "sleep 1", "Restart": true}``, with ``Pool``
and ``App``) and the richer one in the same body: each field has its article
spelling and its plain one. ``JobStatus`` is also the job's row in the
registry view (without its task list past ``VIEW_TASKS`` tasks).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictBool

from bodega.jobs.periodic import Periodic, Schedule
from bodega.jobs.spec import (
    BODEGA_POOL,
    JobSpec,
    check_after,
    check_name,
    check_periodic,
    check_pool,
    deadline_at,
    machine_config,
    split_command,
)
from bodega.model.answer import Answer
from bodega.model.machine_config import MachineConfig

VIEW_TASKS = 64  # a job's row in the view lists its tasks up to this count
WORKER_ID = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@-]*$")


def _either(article: str, plain: str) -> AliasChoices:
    return AliasChoices(article, plain)


class SchedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SubmitBody(SchedRequest):
    """A job: the article's shape, or the richer one (both spellings of each field)."""

    name: str | None = Field(default=None, validation_alias=_either("Name", "name"))
    command: str | list[str] | None = Field(default=None,
                                            validation_alias=_either("Command", "command"))
    # Strict: "yes", "false" or 0 would be read as a boolean; JSON has true and false.
    restart: StrictBool | None = Field(default=None,
                                       validation_alias=_either("Restart", "restart"))
    pool: str | None = Field(default=None, validation_alias=_either("Pool", "pool"))
    app: str | None = Field(default=None, validation_alias=_either("App", "app"))
    config: MachineConfig | None = None
    count: int = Field(default=1, ge=1, le=10_000)
    cpus: int | None = Field(default=None, ge=1, le=64)
    memory_mb: int | None = Field(default=None, ge=128)
    cpu_kind: Literal["shared", "performance"] | None = None
    env: dict[str, str] | None = None
    max_attempts: int | None = Field(default=None, ge=0, le=10_000)
    backoff: float | None = Field(default=None, ge=0, le=3600)
    lease_seconds: float | None = Field(default=None, ge=1, le=3600)
    grace_seconds: float | None = Field(default=None, ge=0, le=300)
    deadline: float | str | None = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=256)
    region: str | None = None
    after: list[str] | None = None  # jobs of the app that must succeed first
    periodic: Schedule | None = None

    def job_name(self) -> str:
        """The name given, else one made from the idempotency key (a retry gets the same),
        else a random one."""
        if self.name:
            return check_name(self.name)
        if self.idempotency_key:
            return "job-" + hashlib.sha256(self.idempotency_key.encode()).hexdigest()[:12]
        return "job-" + secrets.token_hex(6)

    def spec(self, app: str, now: float) -> JobSpec:
        """The job as its home keeps it; ValueError names what is wrong."""
        command = split_command(self.command) if self.command is not None else ()
        config = machine_config(command, self.config, cpus=self.cpus,
                                memory_mb=self.memory_mb, cpu_kind=self.cpu_kind, env=self.env)
        config.check_limits()
        attempts = self.max_attempts
        if attempts is None:  # the article's Restart: retry until it works (or the deadline)
            attempts = 3 if self.restart is None else (0 if self.restart else 1)
        name = self.job_name()
        periodic, deadline = None, deadline_at(self.deadline, now)
        if self.periodic is not None:
            if self.after:
                raise ValueError("a periodic job cannot wait for other jobs (after)")
            if isinstance(self.deadline, str):
                raise ValueError("a periodic job's deadline is seconds from each run's launch, "
                                 "not a time")
            periodic = check_periodic(name, Periodic(
                **self.periodic.model_dump(), run_seconds=self.deadline))
            deadline = None
        extra = {k: v for k, v in (("backoff", self.backoff),
                                   ("lease_seconds", self.lease_seconds),
                                   ("grace_seconds", self.grace_seconds)) if v is not None}
        return JobSpec(app=app, name=name,
                       pool=check_pool(self.pool or BODEGA_POOL),
                       command=command or tuple(config.command() or ()), config=config,
                       count=self.count, max_attempts=attempts,
                       deadline_at=deadline, idempotency_key=self.idempotency_key,
                       region=self.region, after=check_after(name, self.after or ()),
                       periodic=periodic, **extra)


class ClaimBody(SchedRequest):
    worker: str = WORKER_ID
    task: int | None = Field(default=None, ge=0)  # a given task; default: the first queued


class RenewBody(SchedRequest):
    worker: str = WORKER_ID
    task: int | None = Field(default=None, ge=0)  # default: the one task it holds of the job


class ReleaseBody(SchedRequest):
    worker: str = WORKER_ID
    task: int | None = Field(default=None, ge=0)
    exit_code: int | None = Field(default=None, ge=-255, le=255)  # none: gives the task back
    reason: str | None = Field(default=None, max_length=500)


class RegisterBody(SchedRequest):
    """An external worker of assignment mode: what it has (the article's keys, or plain)."""

    worker: str = WORKER_ID
    pool: str
    cpus: float = Field(validation_alias=_either("cpu", "cpus"), gt=0, le=100_000)
    mem: float | str = Field(default=0, validation_alias=_either("mem", "memory_gb"))
    memory_mb: int | None = Field(default=None, ge=0)
    diskfree: float | str = Field(default=0, validation_alias=_either("diskfree", "disk_gb"))


# -- answers ------------------------------------------------------------------------------
class TaskStatus(Answer):
    index: int
    state: str
    attempts: int = 0
    exit_codes: list[int | None] = []
    worker: str | None = None  # who holds it, or last held it
    machine_id: str | None = None
    lease_expires_at: str | None = None
    eligible_at: str | None = None  # a queued task waiting out its backoff
    started_at: str | None = None
    ended_at: str | None = None
    stopping: str | None = None
    reason: str | None = None
    output: list[str] | None = None  # the last lines it printed (a status's ?lines=)


class HeldTask(Answer):
    """A running task in a job's row: who holds it (cancellations, assignment mode)."""

    index: int
    worker: str
    attempt: int
    stopping: str | None = None
    machine_id: str | None = None


class PeriodicStatus(Answer):
    """Where a periodic job's schedule stands."""

    cron: str
    time_zone: str
    overlap: str
    next_run_at: str
    checked_at: str | None = None  # the scheduler's clock when it last read the schedule
    launched: int = 0
    skipped: int = 0  # fires that launched nothing (overlap skip, missed while down)
    pending: int = 0  # fires queued behind an unfinished run (overlap queue)
    last_run: str | None = None  # the latest run's name
    last_run_state: str | None = None


class JobStatus(Answer):
    id: str
    name: str
    app: str
    pool: str
    state: str
    home: str
    count: int
    counts: dict[str, int] = {}
    command: list[str] = []
    cpus: int = 1
    memory_mb: int = 256
    max_attempts: int = 0
    created_at: str = ""
    updated_at: str = ""
    finished_at: str | None = None
    deadline_at: str | None = None
    idempotency_key: str | None = None
    held: list[HeldTask] = []
    tasks: list[TaskStatus] | None = None
    after: list[str] = []  # the jobs it runs after
    waiting_for: list[str] = []  # those it still waits for
    periodic: PeriodicStatus | None = None
    parent: str | None = None  # a run of a periodic job: that job's name
    fire_at: str | None = None  # ... and the fire it runs for


class JobDoorInfo(Answer):
    worker: str
    url: str  # its jobs door: POST {url}/sched/submit with the pass
    region: str = ""


class JobPassAnswer(Answer):
    """A jobs pass (``jobs/passes.py``) and where to use it: a client submits each
    job to the first of the rendezvous order of ``app/name`` over ``homes``' workers."""

    token: str  # the pass: Authorization: Bearer <token> at a jobs door
    app: str
    expires_at: int  # Unix seconds: ask for another before
    homes: list[JobDoorInfo] = []  # the live workers' jobs doors


class SubmitRefused(Answer):
    """One element of a list submit that was refused, in the error shape (``error``,
    ``status``) with the element's place in the list and its name when it gave one."""

    index: int
    name: str | None = None
    error: str
    status: str


SubmitOutcome = JobStatus | SubmitRefused  # one per element of a list submit, in its order


class ClaimAnswer(Answer):
    """A task given to a claimant (or assigned to a registered worker), with its lease."""

    job: str
    name: str
    app: str
    pool: str
    task: int
    attempt: int
    worker: str
    lease_expires_at: str
    lease_seconds: float
    grace_seconds: float = 5.0
    command: list[str] = []
    env: dict[str, str] = {}
    config: MachineConfig | None = None
    stopping: str | None = None  # assignment mode: this task is to be stopped


class RenewAnswer(Answer):
    name: str
    task: int
    verdict: Literal["ok", "stop", "lost"]
    lease_expires_at: str | None = None


class ReleaseAnswer(Answer):
    name: str
    task: int
    state: str  # the task's, after the release
    job_state: str


class Cancellation(Answer):
    job: str
    name: str
    app: str
    task: int
    worker: str
    reason: str


class Registration(Answer):
    worker: str
    pool: str
    app: str | None = None  # an app token's worker only ever gets that app's jobs
    cpus: float
    memory_mb: float
    disk_gb: float
    registered_at: str


class Ok(Answer):
    ok: bool = True
