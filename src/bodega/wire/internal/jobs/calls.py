"""Jobs between bodega's own components: broker to a job's home, and worker to worker.

A job's home (the worker that committed it) decides its claims; the broker
hands it submits, claims, renewals, releases and cancels, and the workers that
run bodega-pool tasks ask it for tasks (``take``), renew their leases and
report ends. The home in turn places reservations ("probes") on those workers
and tells them to stop a cancelled task. Requests forbid unknown fields, as
every internal body does (``worker_calls.py``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bodega.jobs.spec import JobSpec
from bodega.model.capacity import Ask
from bodega.wire.internal.worker_calls import WorkerAnswer, WorkerRequest
from bodega.wire.public.jobs.api import ClaimAnswer, RenewAnswer

MAX_TAKE = 64  # tasks one call may take at once
MAX_RELEASES = 256  # ends one call may report at once
MAX_PROBES = 256  # probes, and drops, one call may carry at once


class HomeSubmit(WorkerRequest):
    """A job for its home to commit, and where the broker would place its probes."""

    spec: JobSpec
    probes: dict[str, int] = {}  # worker -> probes, in the broker's ranking order


class HomeClaim(WorkerRequest):
    """A claim (claim mode), an assignment (assignment mode) or a take (late binding)."""

    worker: str = Field(min_length=1, max_length=128)
    mode: Literal["claim", "assign", "take"] = "claim"
    task: int | None = Field(default=None, ge=0)
    count: int = Field(default=1, ge=1, le=MAX_TAKE)
    ref: str | None = Field(default=None, max_length=128)  # a probe: a retried take finds it


class HomeClaimAnswer(WorkerAnswer):
    tasks: list[ClaimAnswer] = []
    drop: bool = False  # nothing left for this job's probes: drop them


class RenewItem(WorkerRequest):
    job: str
    task: int = Field(ge=0)
    machine_id: str | None = None
    attempt: int | None = Field(default=None, ge=1)  # bodega's workers: which attempt runs


class HomeRenew(WorkerRequest):
    """A claimant's leases at one home, renewed in one call."""

    worker: str = Field(min_length=1, max_length=128)
    tasks: list[RenewItem] = Field(default_factory=list, max_length=10_000)


class RenewResult(WorkerAnswer):
    job: str
    answer: RenewAnswer


class HomeRenewAnswer(WorkerAnswer):
    results: list[RenewResult] = []


class HomeRelease(WorkerRequest):
    worker: str = Field(min_length=1, max_length=128)
    task: int | None = Field(default=None, ge=0)
    exit_code: int | None = Field(default=None, ge=-255, le=255)
    reason: str | None = Field(default=None, max_length=500)
    attempt: int | None = Field(default=None, ge=1)  # bodega's workers: which attempt ended


class ReleaseItem(WorkerRequest):
    """One attempt's end in a batch of them (a worker's runs that ended together)."""

    job: str
    task: int = Field(ge=0)
    exit_code: int | None = Field(default=None, ge=-255, le=255)
    reason: str | None = Field(default=None, max_length=500)
    attempt: int | None = Field(default=None, ge=1)
    machine_id: str | None = Field(default=None, max_length=64)  # where the attempt ran


class HomeReleases(WorkerRequest):
    """A worker's ends at one home, heard in one call and one commit."""

    worker: str = Field(min_length=1, max_length=128)
    items: list[ReleaseItem] = Field(min_length=1, max_length=MAX_RELEASES)


class ReleaseResult(WorkerAnswer):
    job: str
    task: int
    status: Literal["ok", "refused", "gone"]  # heard; not this attempt's to end; no such job
    detail: str = ""


class HomeReleasesAnswer(WorkerAnswer):
    results: list[ReleaseResult] = []


class ProbeBody(WorkerRequest):
    """Reservations for one job on one worker: ask its home for a task when one reaches the
    head of the queue and a task of this size fits."""

    job: str
    home: str
    app: str
    count: int = Field(ge=1, le=100_000)
    cpu_kind: str = "shared"
    cpus: int = Field(default=1, ge=0, le=64)
    memory_mb: int = Field(default=256, ge=0)
    gpus: int = Field(default=0, ge=0)
    gpu_kind: str | None = None

    @classmethod
    def of(cls, job: str, home: str, app: str, ask: Ask, count: int) -> ProbeBody:
        return cls(job=job, home=home, app=app, count=count, cpu_kind=ask.cpu_kind,
                   cpus=ask.cpus, memory_mb=ask.memory_mb, gpus=ask.gpus, gpu_kind=ask.gpu_kind)

    def ask(self) -> Ask:
        return Ask(cpu_kind=self.cpu_kind, cpus=self.cpus, memory_mb=self.memory_mb,
                   gpus=self.gpus, gpu_kind=self.gpu_kind)


class ProbeBatch(WorkerRequest):
    """What a home has for one runner since its last call: the jobs whose probes the runner
    is to drop (started elsewhere, or cancelled), then probes to hold. One call, one commit
    on each side, for all a busy home's jobs of a moment, not one each."""

    home: str
    drops: list[str] = Field(default=[], max_length=MAX_PROBES)
    probes: list[ProbeBody] = Field(default=[], max_length=MAX_PROBES)

    @model_validator(mode="after")
    def _one_home(self) -> ProbeBatch:
        if others := sorted({p.home for p in self.probes} - {self.home}):
            raise ValueError(f"a batch of {self.home}'s carries probes of {', '.join(others)}")
        return self


class RunStop(WorkerRequest):
    """Stop a task this worker runs: SIGTERM (the config's stop signal), SIGKILL after
    ``grace`` seconds."""

    job: str
    task: int = Field(ge=0)
    grace: float = Field(default=5.0, ge=0, le=300)


class Probed(WorkerAnswer):
    job: str
    queued: int  # probes this worker now holds for the job


class ProbesHeld(WorkerAnswer):
    """A ``ProbeBatch`` applied: how many of its drops found probes, and what each probe
    made of its job's (``Probed``), in the batch's order."""

    dropped: int
    probed: list[Probed]
