"""A typed client for the job routes of a worker's internal API (``wire/internal/jobs/calls.py``).

It is a ``WorkerClient``: the same transport, token and error mapping as every
other internal call, so what secures and carries those carries these. Brokers
call a job's home with it; workers call each other with it (a runner asks a
home for tasks, a home places probes on runners).
"""

from __future__ import annotations

from urllib.parse import quote

from bodega.wire.internal.jobs.calls import (
    HomeClaim,
    HomeClaimAnswer,
    HomeRelease,
    HomeReleases,
    HomeReleasesAnswer,
    HomeRenew,
    HomeRenewAnswer,
    HomeSubmit,
    ProbeBatch,
    ProbeBody,
    Probed,
    ProbesHeld,
    RunStop,
)
from bodega.wire.internal.worker_client import WorkerClient, wire_bytes
from bodega.wire.public.jobs.api import JobStatus, Ok, ReleaseAnswer

__all__ = ["JobClient"]


def job_path(job_id: str, action: str = "") -> str:
    return f"/v1/jobs/{quote(job_id, safe='')}" + (f"/{action}" if action else "")


class JobClient(WorkerClient):
    # -- a job's home ---------------------------------------------------------------------
    async def submit_job(self, body: HomeSubmit) -> JobStatus:
        return await self.answer(JobStatus, "POST", "/v1/jobs", encoded=wire_bytes(body))

    async def find_job(self, app: str, name: str, tasks: bool = False) -> JobStatus:
        """The job named ``name`` in ``app`` on this home (NotFound if it has none)."""
        return await self.answer(JobStatus, "GET", "/v1/jobs/by-name",
                                 params={"app": app, "name": name,
                                         "tasks": "true" if tasks else None})

    async def job(self, job_id: str, tasks: bool = True) -> JobStatus:
        return await self.answer(JobStatus, "GET", job_path(job_id),
                                 params={"tasks": "true" if tasks else None})

    async def list_jobs(self, app: str | None = None) -> list[JobStatus]:
        return await self.answers(JobStatus, "GET", "/v1/jobs", params={"app": app})

    async def claim_task(self, job_id: str, body: HomeClaim) -> HomeClaimAnswer:
        return await self.answer(HomeClaimAnswer, "POST", job_path(job_id, "claim"),
                                 encoded=wire_bytes(body))

    async def renew_leases(self, body: HomeRenew) -> HomeRenewAnswer:
        return await self.answer(HomeRenewAnswer, "POST", "/v1/job-leases",
                                 encoded=wire_bytes(body))

    async def release_task(self, job_id: str, body: HomeRelease) -> ReleaseAnswer:
        return await self.answer(ReleaseAnswer, "POST", job_path(job_id, "release"),
                                 encoded=wire_bytes(body))

    async def release_tasks(self, body: HomeReleases) -> HomeReleasesAnswer:
        return await self.answer(HomeReleasesAnswer, "POST", "/v1/job-releases",
                                 encoded=wire_bytes(body))

    async def cancel_job(self, job_id: str) -> JobStatus:
        return await self.answer(JobStatus, "POST", job_path(job_id, "cancel"))

    # -- a worker that runs tasks -----------------------------------------------------------
    async def probe(self, body: ProbeBody) -> Probed:
        return await self.answer(Probed, "POST", "/v1/job-probes", encoded=wire_bytes(body))

    async def probe_batch(self, body: ProbeBatch) -> ProbesHeld:
        return await self.answer(ProbesHeld, "POST", "/v1/job-probe-batches",
                                 encoded=wire_bytes(body))

    async def drop_probes(self, job_id: str) -> Ok:
        return await self.answer(Ok, "DELETE", f"/v1/job-probes/{quote(job_id, safe='')}")

    async def stop_run(self, body: RunStop) -> Ok:
        return await self.answer(Ok, "POST", "/v1/job-runs/stop", encoded=wire_bytes(body))

    async def task_logs(self, job_id: str, task: int, *, tail: bool = False) -> bytes:
        """What the task's last attempt on this worker printed (as plain text); with
        ``tail``, only its end (``jobs.tail.TAIL_BYTES``)."""
        return await self.exchange(
            "GET", f"/v1/job-logs/{quote(job_id, safe='')}/{task}",
            params={"tail": "1"} if tail else None) or b""
