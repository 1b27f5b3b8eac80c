"""Claim mode, the article's first scheduler: external workers poll, claim, renew, release.

``GET /sched/jobs?pool=P`` lists the jobs of pool P with queued tasks, from the
view, in a random order per call; ``POST /sched/claim/{name}`` asks the job's
home, which gives the task to exactly one claimant (200 with a lease) and
answers 409 to the others; the claimant renews its lease
(``/sched/renew/{name}``) and reports the end (``/sched/release/{name}``: an
exit code, or none to give the task back). ``GET /sched/cancellations`` tells
a worker which of its tasks are to stop, from the view. Jobs of the
``bodega`` pool are run by bodega's own workers and cannot be claimed.
"""

from __future__ import annotations

from bodega.broker.jobs.desk import JobDesk, home_down
from bodega.model.errors import BadRequest, Conflict, NotFound, Unavailable
from bodega.wire.internal.jobs.calls import HomeClaim, HomeRelease, HomeRenew, RenewItem
from bodega.wire.public.jobs.api import (
    Cancellation,
    ClaimAnswer,
    ClaimBody,
    JobStatus,
    ReleaseAnswer,
    ReleaseBody,
    RenewAnswer,
    RenewBody,
)

# A home's refusals of a claim that mean the job has no task to claim now.
NONE_LEFT = frozenset({"already_claimed", "finished"})


class Claims:
    def __init__(self, desk: JobDesk) -> None:
        self.desk = desk

    async def claim(self, app: str, name: str, body: ClaimBody,
                    mode: str = "claim") -> ClaimAnswer:
        job = await self.desk.locate(app, name)
        call = HomeClaim(worker=body.worker, mode="assign" if mode == "assign" else "claim",
                         task=body.task)
        self.desk.index.claiming(job.id)
        try:
            answer = await self.desk.home(job.home).claim_task(job.id, call)
        except NotFound:
            raise
        except Unavailable as exc:
            raise home_down(job.home, exc) from exc
        except Conflict as exc:  # none left to claim: listed as queued no more, until its row
            if body.task is None and exc.status in NONE_LEFT:
                self.desk.index.claimed(job.id, none_left=True)
            raise
        finally:
            self.desk.index.claiming(job.id, sent=False)
        self.desk.index.claimed(job.id)
        return answer.tasks[0]

    def _held(self, job: JobStatus, worker: str, task: int | None) -> int:
        if task is not None:
            return task
        mine = [h.index for h in job.held if h.worker == worker]
        if len(mine) == 1:
            return mine[0]
        if not mine:  # the view may be behind the claim: the home knows
            return 0 if job.count == 1 else _name_the_task(job, worker, mine)
        return _name_the_task(job, worker, mine)

    async def renew(self, app: str, name: str, body: RenewBody) -> RenewAnswer:
        job = await self.desk.locate(app, name)
        item = RenewItem(job=job.id, task=self._held(job, body.worker, body.task))
        try:
            answer = await self.desk.home(job.home).renew_leases(
                HomeRenew(worker=body.worker, tasks=[item]))
        except Unavailable as exc:
            raise home_down(job.home, exc) from exc
        return answer.results[0].answer

    async def release(self, app: str, name: str, body: ReleaseBody) -> ReleaseAnswer:
        job = await self.desk.locate(app, name)
        call = HomeRelease(worker=body.worker, task=body.task, exit_code=body.exit_code,
                           reason=body.reason)
        try:
            return await self.desk.home(job.home).release_task(job.id, call)
        except NotFound:
            raise
        except Unavailable as exc:
            raise home_down(job.home, exc) from exc

    def cancellations(self, worker: str, app: str | None) -> list[Cancellation]:
        return [Cancellation(job=job.id, name=job.name, app=job.app, task=held.index,
                             worker=worker, reason=held.stopping or "")
                for job, held in self.desk.index.held_by(worker, app) if held.stopping]


def _name_the_task(job: JobStatus, worker: str, mine: list[int]) -> int:
    held = f"holds tasks {', '.join(map(str, mine))}" if mine else "holds none it seems"
    raise BadRequest(f"invalid_argument: {worker} {held} of job {job.name} "
                     f"({job.count} tasks): name the task")
