"""Assignment mode, the article's centralized variant: registered workers are given tasks.

``POST /sched/register`` records what an external worker has (a shared row of
the view, like an app: any broker reads it). Each ``GET /sched/assigned`` of
that worker renews the leases of the tasks it holds, then fills its free room
(registered minus held) with queued tasks of its pool, oldest job first, each
assignment decided by the job's home (one winner, as for a claim), and answers
every task it holds. ``POST /sched/started/{name}`` confirms a start (and
renews), ``POST /sched/stopped/{name}`` reports the end; cancellations are
polled as in claim mode. A worker that stops polling loses its tasks when
their leases lapse: they go back to the queue, their attempt counted.
"""

from __future__ import annotations

import time

from bodega.broker.jobs.claims import Claims
from bodega.broker.jobs.desk import JobDesk
from bodega.broker.view.catalog import Catalog
from bodega.jobs.assign import Offer, Room, choose, free_room, gigabytes
from bodega.jobs.spec import BODEGA_POOL, check_pool
from bodega.model.answer import from_doc
from bodega.model.errors import BadRequest, BodegaError, Conflict, NotFound
from bodega.model.machine import rfc3339
from bodega.wire.internal.jobs.calls import HomeClaim, HomeRenew, RenewItem
from bodega.wire.public.jobs.api import ClaimAnswer, JobStatus, RegisterBody, Registration

RECENT_SECONDS = 120.0  # this broker's assignments, answered again until the view has them


class Assignment:
    def __init__(self, catalog: Catalog, desk: JobDesk, claims: Claims) -> None:
        self.catalog = catalog
        self.desk = desk
        self.claims = claims
        self._recent: dict[tuple[str, str, int], tuple[float, ClaimAnswer]] = {}

    def register(self, body: RegisterBody, app: str | None) -> Registration:
        try:
            pool = check_pool(body.pool)
            memory_mb = body.memory_mb if body.memory_mb is not None else \
                gigabytes(body.mem) * 1024
            disk = gigabytes(body.diskfree)
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: {exc}") from None
        if pool == BODEGA_POOL:
            raise BadRequest("invalid_argument: pool bodega is run by bodega's own workers; "
                             "register with a pool of your own")
        reg = Registration(worker=body.worker, pool=pool, app=app, cpus=body.cpus,
                           memory_mb=memory_mb, disk_gb=disk, registered_at=rfc3339(time.time()))
        self.catalog.put_shared("sched_workers", body.worker, reg.doc())
        return reg

    def registration(self, worker: str, app: str | None) -> Registration:
        reg = from_doc(Registration, self.catalog.get("sched_workers", worker))
        if reg is None or (app is not None and reg.app not in (None, app)):
            raise NotFound(f"worker {worker} is not registered: POST /sched/register first")
        return reg

    async def assigned(self, worker: str, app: str | None) -> list[ClaimAnswer]:
        reg = self.registration(worker, app)
        scope = reg.app or app
        now = time.time()
        held = await self._renew(worker, scope, now)
        room = free_room(Room(reg.cpus, reg.memory_mb),
                         ((a_job.cpus, a_job.memory_mb) for a_job, _ in held.values()))
        offers = {job.id: job for job in
                  self.desk.index.listing(app=scope, pool=reg.pool, queued_only=True)}
        for offer, n in choose([_offer(job) for job in offers.values()], room):
            job = offers[offer.job_id]
            try:
                answer = await self.desk.home(job.home).claim_task(
                    job.id, HomeClaim(worker=worker, mode="assign", count=n))
            except (Conflict, NotFound):
                continue  # taken by another, or gone: the next poll sees the view again
            except BodegaError:
                continue  # its home does not answer now
            for task in answer.tasks:
                held[(job.id, task.task)] = (job, task)
                self._recent[(worker, job.id, task.task)] = (now, task)
        return [task for _, task in held.values()]

    async def _renew(self, worker: str, app: str | None,
                     now: float) -> dict[tuple[str, int], tuple[JobStatus, ClaimAnswer]]:
        """The tasks ``worker`` holds (the view's, and this broker's recent assignments),
        their leases renewed at their homes; lost ones are left out."""
        for key in [k for k, (at, _) in self._recent.items() if now - at > RECENT_SECONDS]:
            del self._recent[key]
        held: dict[tuple[str, int], tuple[JobStatus, ClaimAnswer]] = {}
        for job, in_view in self.desk.index.held_by(worker, app):
            recent = self._recent.get((worker, job.id, in_view.index))
            held[(job.id, in_view.index)] = (job, recent[1] if recent else _thin(
                job, in_view.index, in_view.attempt, worker))
        for (w, job_id, index), (_, given) in self._recent.items():
            known = self.desk.index.jobs.get(job_id)
            if w == worker and known is not None and (job_id, index) not in held:
                held[(job_id, index)] = (known, given)
        by_home: dict[str, list[tuple[str, int]]] = {}
        for (job_id, index), (job, _) in held.items():
            by_home.setdefault(job.home, []).append((job_id, index))
        for home, keys in by_home.items():
            try:
                renewed = await self.desk.home(home).renew_leases(HomeRenew(
                    worker=worker, tasks=[RenewItem(job=j, task=i) for j, i in keys]))
            except BodegaError:
                continue  # its home is down: keep them, the lease was given for this
            for (job_id, index), result in zip(keys, renewed.results, strict=False):
                job, task = held[(job_id, index)]
                if result.answer.verdict == "lost":
                    del held[(job_id, index)]
                    self._recent.pop((worker, job_id, index), None)
                else:
                    held[(job_id, index)] = (job, task.model_copy(update={
                        "lease_expires_at": result.answer.lease_expires_at or "",
                        "stopping": "stop" if result.answer.verdict == "stop" else None}))
        return held


def _offer(job: JobStatus) -> Offer:
    return Offer(job_id=job.id, name=job.name, app=job.app, queued=job.counts.get("queued", 0),
                 cpus=job.cpus, memory_mb=job.memory_mb, created_at=0.0)


def _thin(job: JobStatus, index: int, attempt: int, worker: str) -> ClaimAnswer:
    """A held task another broker assigned: what the view says of it."""
    return ClaimAnswer(job=job.id, name=job.name, app=job.app, pool=job.pool, task=index,
                       attempt=attempt, worker=worker, lease_expires_at="",
                       lease_seconds=0.0, command=list(job.command))

