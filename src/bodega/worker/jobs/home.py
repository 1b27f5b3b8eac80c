"""A job's home: the one place its claims are decided, each in one SQLite transaction.

The broker that took a submit chose this worker (rendezvous hashing over the
live workers) and the submit is answered only once it is committed here, with
its idempotency key checked in the same transaction. From then on every claim,
take (late binding), renewal, release and cancel of the job is decided here:
the rule is pure (``jobs/tasks.py``), applied inside ``JobStore.tx()`` with
no ``await`` in between, so two claimants racing for one task get one 200 and
one 409. No consensus protocol: one writer per job.

After each commit the home tells its listeners (``changed``: the publisher and
the upkeep loop) and, for a cancel, asks the workers running bodega-pool tasks
to stop them (``stops``) and those holding its probes to drop them (``drops``).

The module is long because it is every decision a home makes about its jobs, each
the same shape (read, apply a pure rule, write, in one transaction): split by call,
the one-writer rule would be spread over files that each open the store.
"""

from __future__ import annotations

import logging
import random
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from bodega.jobs.jobs import FINISHED, JobState, admit, job_state, pick
from bodega.jobs.periodic import next_fire, run_name
from bodega.jobs.seats import at_submit
from bodega.jobs.spec import BODEGA_POOL, run_spec
from bodega.jobs.tasks import Task, TaskState, cancel, claim, counts_of, holds, release, renew
from bodega.model.errors import BadRequest, Conflict, NotFound
from bodega.model.ids import new_ulid
from bodega.model.machine import rfc3339
from bodega.wire.internal.jobs.calls import (
    HomeClaim,
    HomeClaimAnswer,
    HomeRelease,
    HomeReleases,
    HomeReleasesAnswer,
    HomeRenew,
    HomeRenewAnswer,
    HomeSubmit,
    ReleaseResult,
    RenewResult,
)
from bodega.wire.public.jobs.api import JobStatus, ReleaseAnswer, RenewAnswer
from bodega.worker.jobs.render import claimed, job_status, periodic_status
from bodega.worker.jobs.seats import Seated, SubmitSeats
from bodega.worker.jobs.store import JobRow, JobStore, PeriodicRow

log = logging.getLogger("bodega.worker.jobs")


@dataclass(frozen=True)
class StopOrder:
    """Tell ``worker`` to stop task ``task`` of ``job`` (SIGTERM, SIGKILL after ``grace``)."""

    worker: str
    job: str
    task: int
    grace: float


class JobsRead:
    """The jobs one call names, each read once: a worker's batch of ends or renewals names
    the same few jobs again and again."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.seen: dict[str, JobRow | None] = {}

    def get(self, job_id: str) -> JobRow | None:
        if job_id not in self.seen:
            self.seen[job_id] = self.store.job(job_id)
        return self.seen[job_id]

    def again(self, job_id: str) -> JobRow | None:
        """Read anew (its state was just written)."""
        self.seen.pop(job_id, None)
        return self.get(job_id)


class JobHome:
    def __init__(self, store: JobStore, name: str, queue_limit: int,
                 rng: random.Random | None = None,
                 calendar: Callable[[], float] | None = None) -> None:
        self.store = store
        # The clock periodic jobs fire by: the wall clock, or one a test sets
        # (``--job-clock-file``) to cross a daylight-saving change at will.
        self.calendar = calendar or store.clock
        self.checked: dict[str, float] = {}  # periodic job: the calendar when last read
        self.name = name
        self.queue_limit = queue_limit
        self.rng = rng or random.Random()
        self.changed: Callable[[str], None] = lambda _job: None
        self.stops: Callable[[list[StopOrder]], None] = lambda _orders: None
        self.drops: Callable[[str, list[str]], None] = lambda _job, _workers: None
        self.seats: SubmitSeats | None = None  # this worker's warm slots, for a submit
        self.sync_submits = False  # fsync a submit before its answer (docs/jobs.md)

    @property
    def clock(self) -> Callable[[], float]:
        return self.store.clock

    # -- reading ------------------------------------------------------------------------------
    def get(self, job_id: str) -> JobRow:
        job = self.store.job(job_id)
        if job is None:
            raise NotFound(f"job not found: {job_id}")
        return job

    def find(self, app: str, name: str) -> JobRow:
        job = self.store.job_named(app, name)
        if job is None:
            raise NotFound(f"job not found: {name} in app {app}")
        return job

    def status(self, job: JobRow, *, tasks: bool = True) -> JobStatus:
        conn = self.store.db
        listed = self.store.tasks(conn, job.id) if tasks else None
        if listed is None:  # a job's counts without its tasks: kept by triggers
            states, running = self.store.counts(conn, job.id), self.store.running(conn, job.id)
        else:  # else counted from the tasks read anyway (a submit answers with them)
            states, running = counts_of(listed), [t for t in listed
                                                  if t.state is TaskState.RUNNING]
        schedule = self.store.periodic(job.id) if job.spec.periodic else None
        last = self.store.job(schedule.last_run) if schedule and schedule.last_run else None
        return job_status(job, self.name, states, running, listed, self.clock(),
                          periodic=None if schedule is None else
                          periodic_status(job.spec, schedule, last, self.checked.get(job.id)))

    # -- submit -------------------------------------------------------------------------------
    def submit(self, body: HomeSubmit) -> JobRow:
        """Commit the job (or find the one its idempotency key already made)."""
        spec = body.spec
        now = self.clock()
        seated: tuple[Seated, JobRow] | None = None
        with self.store.tx(synced=self.sync_submits) as conn:
            if spec.idempotency_key:
                earlier = self.store.job_keyed(spec.app, spec.idempotency_key)
                if earlier is not None:
                    return earlier
            if self.store.job_named(spec.app, spec.name) is not None:
                raise Conflict(f"a job named {spec.name!r} already exists in app {spec.app}",
                               status="name_taken")
            admit(self.store.queued_total(), spec.count, self.queue_limit)
            job_id = new_ulid(int(now * 1000))
            self.store.insert_job(conn, job_id, spec, now)
            if spec.periodic is not None:
                at = self.calendar()
                self.store.insert_periodic(conn, PeriodicRow(job_id, next_fire(spec.periodic, at)))
                self.checked[job_id] = at
            elif spec.pool == BODEGA_POOL and not spec.after:
                seated = self._seat(conn, JobRow(job_id, spec, JobState.QUEUED, now, now, None),
                                    now)
                if seated is None and body.probes:  # else the upkeep's top-up places them
                    self.store.add_probes(conn, job_id, body.probes, now)
        if seated is not None and self.seats is not None:
            self.seats.start(seated[0])
        if log.isEnabledFor(logging.INFO):
            log.info("job %s (%s/%s): %d task(s) of %s committed here%s", job_id, spec.app,
                     spec.name, spec.count, " ".join(spec.command)[:80],
                     "" if seated is None else ", started")
        self.changed(job_id)
        return seated[1] if seated is not None else self.get(job_id)

    def seat_queued(self, most: int = 8) -> int:
        """Queued one-task jobs of this home (the oldest ``most``) started in warm slots that
        came free here, each as at its submit: a job that found every slot busy at its
        submit runs the moment one frees, with no probe and no take. How many started."""
        now = self.clock()
        waiting = sorted(job for job, n in self.store.claimable_by_job(now, BODEGA_POOL).items()
                         if n == 1)[:most]  # ULIDs: the oldest first
        if self.seats is None or not waiting:
            return 0
        seated: list[tuple[str, Seated]] = []
        probed: dict[str, list[str]] = {}  # job -> the other workers holding its probes
        full: set[str] = set()  # the slot shapes found with no slot free: skipped after
        with self.store.tx(synced=False) as conn:
            for job_id in waiting:
                job = self.store.job(job_id)
                if job is None or not self.seats.may_seat(job, full):
                    continue
                if (found := self._seat(conn, job, now, full)) is not None:
                    seated.append((job_id, found[0]))
                    # Its one task runs: its probes are of no use, and taking one would only
                    # cost its holder and this home a call answered "drop".
                    probed[job_id] = self._forget_probes(conn, job_id)
        for job_id, seat in seated:
            self.seats.start(seat)
            self.changed(job_id)
            if probed[job_id]:
                self.drops(job_id, probed[job_id])
        return len(seated)

    def _seat(self, conn: sqlite3.Connection, job: JobRow, now: float,
              full: set[str] | None = None) -> tuple[Seated, JobRow] | None:
        """The task claimed by this worker, running in a free warm slot here, in the submit's
        transaction (``bodega.jobs.seats``), and the job as it then is; None: left queued."""
        task = self.store.task(conn, job.id, 0)
        if self.seats is None or task is None or not at_submit(job.spec, now):
            return None
        won = claim(task, job.policy, self.name, now)
        if (seated := self.seats.seat(conn, job, won, now, full)) is None:
            return None
        state = self.apply(conn, job, [replace(won, machine_id=seated.machine_id)], now)
        return seated, replace(job, state=JobState(state), updated_at=now)

    # -- periodic jobs' runs -------------------------------------------------------------------
    def launch(self, parent: JobRow, fire: float, after: PeriodicRow) -> JobRow:
        """Commit the run of periodic job ``parent`` for ``fire`` with where its schedule
        stands ``after``, in one transaction: a crash never launches a run without recording
        it, and a launch tried again finds the run its fire already made."""
        now = self.clock()
        name = run_name(parent.name, fire)
        with self.store.tx() as conn:
            run = self.store.job_named(parent.app, name)
            if run is None:
                spec = run_spec(parent.spec, name, fire, now)
                admit(self.store.queued_total(), spec.count, self.queue_limit)
                run_id = new_ulid(int(now * 1000))
                self.store.insert_job(conn, run_id, spec, now)
            else:
                run_id = run.id
            self.store.put_periodic(conn, replace(after, last_run=run_id,
                                                  launched=after.launched + (run is None)))
        log.info("job %s: run %s launched for %s", parent.name, name, rfc3339(fire))
        self.changed(run_id)
        self.changed(parent.id)
        return self.get(run_id)

    def record(self, after: PeriodicRow) -> None:
        """Where a schedule stands, when a fire launched nothing."""
        with self.store.tx() as conn:
            self.store.put_periodic(conn, after)
        self.changed(after.job_id)

    # -- claims -------------------------------------------------------------------------------
    def claim(self, job_id: str, body: HomeClaim) -> HomeClaimAnswer:
        job = self.get(job_id)
        bodega = job.spec.pool == BODEGA_POOL
        if bodega != (body.mode == "take"):
            raise Conflict(
                f"job {job.name} is in pool {job.spec.pool}: " + (
                    "bodega's own workers run it; external workers claim jobs of other pools"
                    if bodega else "external workers claim it, not bodega's workers"),
                status="wrong_pool")
        if job.spec.periodic is not None:
            raise Conflict(f"job {job.name} is periodic: each run is a job of its own, named "
                           f"{job.name}-<the UTC minute it fired for>", status="periodic")
        if job.waiting:
            if body.mode == "take":
                with self.store.tx() as conn:
                    self.store.probes_answered(conn, job_id, body.worker, 0, drop=True)
                return HomeClaimAnswer(drop=True)
            raise Conflict(f"job {job.name} waits for {', '.join(job.waiting)} to succeed",
                           status="waiting")
        now = self.clock()
        with self.store.tx(synced=False) as conn:
            if body.ref is not None:
                again = self.store.held(conn, job_id, body.worker, body.ref)
                if again:  # the same take asked again: its answer was lost
                    return HomeClaimAnswer(tasks=[claimed(job, t, body.worker, bodega)
                                                  for t in again])
            if body.task is not None:
                found = self.store.task(conn, job_id, body.task)
                if found is None:
                    raise NotFound(f"job {job.name} has no task {body.task} "
                                   f"(tasks 0-{job.spec.count - 1})")
                candidates = [found]
            else:
                candidates = pick(self.store.claimable(conn, job_id, now, body.count), now,
                                  body.count)
            if not candidates and body.mode == "take":
                self.store.probes_answered(conn, job_id, body.worker, 0, drop=True)
                return HomeClaimAnswer(drop=True)
            if not candidates:
                raise self._none_left(conn, job, now)
            won = [claim(t, job.policy, body.worker, now, body.ref) for t in candidates]
            self.apply(conn, job, won, now)
            if body.mode == "take":
                self.store.probes_answered(conn, job_id, body.worker, len(won), drop=False)
        self.changed(job_id)
        return HomeClaimAnswer(tasks=[claimed(job, t, body.worker, bodega) for t in won])

    def _none_left(self, conn: sqlite3.Connection, job: JobRow, now: float) -> Conflict:
        states = self.store.counts(conn, job.id)
        if states["queued"]:
            return Conflict(f"job {job.name}: its queued tasks wait out their backoff",
                            status="backoff")
        if job.state in FINISHED:
            return Conflict(f"job {job.name} is {job.state}", status="finished")
        return Conflict(f"job {job.name}: every task is claimed", status="already_claimed")

    def renew(self, body: HomeRenew) -> HomeRenewAnswer:
        now = self.clock()
        results: list[RenewResult] = []
        touched: set[str] = set()
        jobs = JobsRead(self.store)
        with self.store.tx(synced=False) as conn:
            for item in body.tasks:
                job = jobs.get(item.job)
                task = None if job is None else self.store.task(conn, item.job, item.task)
                if job is None or task is None:
                    results.append(RenewResult(job=item.job, answer=RenewAnswer(
                        name=job.name if job else item.job, task=item.task, verdict="lost")))
                    continue
                after, verdict = renew(task, job.policy, body.worker, now, item.machine_id,
                                      item.attempt)
                if after != task:
                    self.store.put_task(conn, job.id, after)
                    if after.machine_id != task.machine_id:
                        touched.add(job.id)
                results.append(RenewResult(job=job.id, answer=RenewAnswer(
                    name=job.name, task=task.index, verdict=verdict.value,
                    lease_expires_at=None if after.lease_expires_at is None else
                    rfc3339(after.lease_expires_at))))
        for job_id in touched:
            self.changed(job_id)
        return HomeRenewAnswer(results=results)

    def release(self, job_id: str, body: HomeRelease) -> ReleaseAnswer:
        job = self.get(job_id)
        now = self.clock()
        with self.store.tx(synced=False) as conn:
            task = self._held_task(conn, job, body.worker, body.task)
            after = release(task, job.policy, body.worker, body.exit_code, now,
                            self.rng.random(), body.reason or "", body.attempt)
            state = self.apply(conn, job, [after], now)
        self.changed(job_id)
        return ReleaseAnswer(name=job.name, task=after.index, state=str(after.state),
                             job_state=str(state))

    def release_many(self, body: HomeReleases) -> HomeReleasesAnswer:
        """Ends a worker reports together, in one commit: each heard or refused on its own
        (a refusal, as for one release, leaves that task as it was), a job's state worked
        out once for all of its ends."""
        now = self.clock()
        results: list[ReleaseResult] = []
        pending: dict[str, tuple[JobRow, dict[int, Task]]] = {}  # job -> its ends heard
        jobs = JobsRead(self.store)
        with self.store.tx(synced=False) as conn:
            for item in body.items:
                job = jobs.get(item.job)
                if job is None:
                    results.append(ReleaseResult(job=item.job, task=item.task, status="gone",
                                                 detail=f"job not found: {item.job}"))
                    continue
                if item.task in pending.get(job.id, (job, {}))[1]:  # a later attempt's end:
                    held_job, ends = pending.pop(job.id)  # the earlier one's is applied first
                    self.apply(conn, held_job, list(ends.values()), now)
                    job = jobs.again(job.id) or job
                try:
                    task = self._held_task(conn, job, body.worker, item.task)
                    after = release(task, job.policy, body.worker, item.exit_code, now,
                                    self.rng.random(), item.reason or "", item.attempt,
                                    item.machine_id)
                except (Conflict, NotFound, BadRequest) as exc:
                    results.append(ReleaseResult(job=item.job, task=item.task,
                                                 status="refused", detail=exc.message))
                    continue
                pending.setdefault(job.id, (job, {}))[1][item.task] = after
                results.append(ReleaseResult(job=item.job, task=item.task, status="ok"))
            for job, ends in pending.values():
                self.apply(conn, job, list(ends.values()), now)
        for job_id in {r.job for r in results if r.status == "ok"}:
            self.changed(job_id)
        return HomeReleasesAnswer(results=results)

    def _held_task(self, conn: sqlite3.Connection, job: JobRow, worker: str,
                   index: int | None) -> Task:
        if index is not None:
            task = self.store.task(conn, job.id, index)
            if task is None:
                raise NotFound(f"job {job.name} has no task {index}")
            if not holds(task, worker):
                # Let the pure rule word the refusal (who holds it, or that it ended).
                release(task, job.policy, worker, None, 0.0, 0.0)
            return task
        mine = self.store.held(conn, job.id, worker)
        if len(mine) == 1:
            return mine[0]
        if not mine:
            raise Conflict(f"{worker} holds no task of job {job.name}", status="not_claimant")
        raise BadRequest(f"invalid_argument: {worker} holds tasks "
                         f"{', '.join(str(t.index) for t in mine)} of job {job.name}: "
                         "name the task")

    # -- cancel -------------------------------------------------------------------------------
    def cancel(self, job_id: str) -> JobRow:
        """Drop the queued tasks; tell the claimants of running ones to stop them. A periodic
        job stops firing (its runs already launched go on: each is cancelled by its name)."""
        job = self.get(job_id)
        now = self.clock()
        if job.spec.periodic is not None:
            if job.finished_at is None:
                with self.store.tx() as conn:
                    self.store.set_job_state(conn, job_id, JobState.CANCELLED, now, True)
                self.changed(job_id)
            return self.get(job_id)
        with self.store.tx() as conn:
            if job.waiting:
                self.store.set_waiting(conn, job_id, None)
                job = replace(job, waiting=None)
            tasks = [t for t in self.store.tasks(conn, job_id) if not t.finished]
            after = [cancel(t, now) for t in tasks]
            self.apply(conn, job, after, now)
            probed = self._forget_probes(conn, job_id)
        self.changed(job_id)
        self.order_stops(job, after)
        if probed:
            self.drops(job_id, probed)
        return self.get(job_id)

    def _forget_probes(self, conn: sqlite3.Connection, job_id: str) -> list[str]:
        """The job's probes forgotten in the caller's transaction, this worker's own runner's
        with them; the other workers that hold one, to be told to drop it (``drops``)."""
        others = [worker for _, worker, _, _ in self.store.probes_out(job_id)
                  if worker != self.name]
        self.store.forget_probes(conn, job_id)
        self.store.forget_held(conn, job_id, self.name)
        return others

    def order_stops(self, job: JobRow, tasks: Sequence[Task]) -> None:
        """Running bodega-pool tasks that are to stop: their workers are told at once (an
        external claimant hears it from ``/sched/cancellations`` or its renewal)."""
        if job.spec.pool != BODEGA_POOL:
            return
        orders = [StopOrder(t.claimant, job.id, t.index, job.spec.grace_seconds)
                  for t in tasks if t.state is TaskState.RUNNING and t.stopping and t.claimant]
        if orders:
            self.stops(orders)

    # -- applying ------------------------------------------------------------------------------
    def apply(self, conn: sqlite3.Connection, job: JobRow, after: Sequence[Task],
              now: float) -> str:
        """Write the tasks a rule changed and the job's state they make (admission reads
        the queued tasks from the counts the database keeps)."""
        for task in after:
            self.store.put_task(conn, job.id, task)
        states = self.store.counts(conn, job.id)
        state = job_state(states)
        if state is JobState.QUEUED and job.waiting:
            state = JobState.WAITING
        if state != job.state or state not in FINISHED:
            self.store.set_job_state(conn, job.id, state, now, state in FINISHED)
        return str(state)
