"""What a home does on its own, a few times a second: lapses, deadlines, probes, retention.

- A running task whose lease lapsed is a failed attempt (``jobs.tasks.lapse``):
  requeued after its backoff, or failed once its attempts are used up.
- A job past its deadline: queued tasks fail, running ones are told to stop.
- Late binding: a bodega-pool job with tasks that may run now keeps ``ratio``
  probes per such task on live workers (``jobs.binding.wanted``), placed on the
  workers with most room in this worker's view; probes are delivered, each runner's
  of a look in one call with the drops it has coming (``ProbeBatch``), and a worker
  that cannot be reached loses them (they are placed elsewhere).
- Jobs that run after others are freed or failed (``waits.py``), about once a second.
- Periodic jobs launch their runs when their schedule fires (``schedules.py``).
- Finished jobs past the TTL, or beyond the newest ``keep`` of their app, go.
- Stop orders are sent as they come; probe drops (a job cancelled, or started by its
  home itself) go with the runner's next probes, the upkeep woken for them.

On start, leases get a full term from now (``after_restart``): while the home
was down no claimant could renew.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import random
from dataclasses import dataclass

from bodega.jobs.binding import by_room, spread, wanted
from bodega.jobs.jobs import Finished, to_drop
from bodega.jobs.spec import BODEGA_POOL
from bodega.jobs.tasks import after_restart, expire, lapse
from bodega.model.errors import BodegaError, NotFound, Unavailable
from bodega.runtime.waits import within
from bodega.wire.internal.jobs.calls import MAX_PROBES, ProbeBatch, ProbeBody, RunStop
from bodega.worker.jobs.home import JobHome, StopOrder
from bodega.worker.jobs.peers import JobPeers
from bodega.worker.jobs.schedules import JobSchedules
from bodega.worker.jobs.waits import JobWaits

log = logging.getLogger("bodega.worker.jobs")

SINGLES_FOR = 60.0  # seconds a runner that knows no batches is sent probes one at a time


@dataclass(frozen=True)
class UpkeepConfig:
    interval: float = 0.2
    # A change wakes the upkeep at once, but no sooner than this after its last look: a
    # home taking hundreds of one-task jobs a second looks after each batch of them, not
    # after each (a new job's probes wait this long at most).
    woken_gap: float = 0.02
    probe_ratio: float = 2.0
    finished_ttl: float = 24 * 3600.0
    keep_per_app: int = 1000
    retention_every: float = 30.0
    schedule_every: float = 1.0


class JobUpkeep:
    def __init__(self, home: JobHome, peers: JobPeers, config: UpkeepConfig,
                 waits: JobWaits, rng: random.Random | None = None) -> None:
        self.home = home
        self.waits = waits
        self.schedules = JobSchedules(home)
        self.store = home.store
        self.peers = peers
        self.config = config
        self.rng = rng or random.Random()
        self.wake = asyncio.Event()
        self._sending: set[str] = set()  # runners a call of probes is under way to
        self._drops: dict[str, set[str]] = {}  # runner -> jobs whose probes it is to drop
        self._singles: dict[str, float] = {}  # runner -> until when it is sent one at a time
        self._tasks: set[asyncio.Task[None]] = set()
        self._next_retention = 0.0
        home.stops = self.send_stops
        home.drops = self.send_drops

    def resumed(self) -> None:
        """After a restart: no lease lapses before a full term from now."""
        now = self.store.clock()
        for job in self.store.jobs():
            if job.finished_at is not None:
                continue
            with self.store.tx() as conn:
                for task in self.store.running(conn, job.id):
                    after = after_restart(task, job.policy, now)
                    if after != task:
                        self.store.put_task(conn, job.id, after)

    async def run(self) -> None:
        while True:
            # With no job under way there is no lease to lapse nor probe to send: a new job
            # wakes us (``JobWiring._changed``); retention still runs in its time. A
            # periodic job alone asks for a look each second: its fires are whole minutes.
            idle = self.config.schedule_every if self.store.any_scheduled() \
                else self.config.retention_every
            with contextlib.suppress(TimeoutError):
                await within(self.wake.wait(), self.config.interval
                             if self.store.any_unfinished() else idle)
            await asyncio.sleep(self.config.woken_gap)  # what else changes meanwhile goes too
            self.wake.clear()
            try:
                await self.waits.look_up(self.store.clock())
                self.tick()
            except Exception:
                log.exception("job upkeep failed")

    def tick(self) -> None:
        now = self.store.clock()
        self.lapse_leases(now)
        self.enforce_deadlines(now)
        self.waits.tick(now)
        self.schedules.tick()
        self.top_up_probes(now)
        self.deliver_probes()
        if now >= self._next_retention:
            self._next_retention = now + self.config.retention_every
            self.retain(now)

    # -- leases and deadlines ---------------------------------------------------------------
    def lapse_leases(self, now: float) -> None:
        for job_id, index in self.store.lapsed(now):
            job = self.store.job(job_id)
            if job is None:
                continue
            with self.store.tx() as conn:
                task = self.store.task(conn, job_id, index)
                after = None if task is None else lapse(task, job.policy, now, self.rng.random())
                if after is None:
                    continue
                self.home.apply(conn, job, [after], now)
            log.info("job %s task %d: %s", job.name, index, after.reason)
            self.home.changed(job_id)

    def enforce_deadlines(self, now: float) -> None:
        for job_id in self.store.past_deadline(now):
            job = self.store.job(job_id)
            if job is None:
                continue
            with self.store.tx() as conn:
                changed = [a for t in self.store.tasks(conn, job_id)
                           if (a := expire(t, job.policy, now)) is not None]
                if not changed:
                    continue
                self.home.apply(conn, job, changed, now)
            self.home.changed(job_id)
            self.home.order_stops(job, changed)

    # -- late binding's probes -----------------------------------------------------------------
    def top_up_probes(self, now: float) -> None:
        """Probes for the jobs with tasks that may run now, where too few are out: placed on
        the live workers with most room, those lost with a worker placed elsewhere. One
        commit for all of them, not fsync'd before the loop goes on: a probe is the home's
        note of where it asked, and one lost with the host's power is placed again by the
        next look (a submit under way waits on no fsync of the upkeep's)."""
        claimable = self.store.claimable_by_job(now, BODEGA_POOL)
        if not claimable:
            return
        out: dict[str, list[tuple[str, int]]] = {}
        for job_id in claimable:
            for _, worker, count, _ in self.store.probes_out(job_id):
                out.setdefault(job_id, []).append((worker, count))
        rooms = None
        alive = functools.cache(self.peers.alive)  # each worker's, looked up once a look
        lost: list[tuple[str, str]] = []
        placing: list[tuple[str, dict[str, int]]] = []
        for job_id, n in claimable.items():
            live = 0
            for worker, count in out.get(job_id, []):
                if alive(worker):
                    live += count
                else:  # lost with their worker: placed elsewhere below
                    lost.append((job_id, worker))
            more = wanted(n, live, self.config.probe_ratio)
            if not more:
                continue
            job = self.store.job(job_id)
            if job is None:
                continue
            rooms = rooms if rooms is not None else self.peers.rooms()
            ask = job.spec.ask()
            regions = tuple(r.strip() for r in (job.spec.region or "").split(",") if r.strip())
            ranked = by_room(rooms, ask.cpus * 250, ask.memory_mb, self.rng, regions)
            if placed := spread(ranked, more):
                placing.append((job_id, placed))
        if lost or placing:
            with self.store.tx(synced=False) as conn:
                for job_id, worker in lost:
                    self.store.forget_probes(conn, job_id, worker)
                for job_id, placed in placing:
                    self.store.add_probes(conn, job_id, placed, now)

    def deliver_probes(self) -> None:
        """Each runner's probes not delivered yet and the drops it has coming, in one call
        (``ProbeBatch``): a busy home's queued jobs of a moment cost each runner one request
        and one commit, not one each. A runner with a call under way gets the next look's."""
        probes: dict[str, list[tuple[str, int]]] = {}
        for job_id, worker, count, delivered in self.store.undelivered_probes():
            if count > delivered:
                probes.setdefault(worker, []).append((job_id, count - delivered))
        for worker in {*probes, *self._drops} - self._sending:
            drops = sorted(self._drops.pop(worker, set()))
            if len(drops) > MAX_PROBES:  # the rest go with the next call
                self._drops[worker] = set(drops[MAX_PROBES:])
            self._sending.add(worker)
            self._spawn(self._deliver(worker, drops[:MAX_PROBES],
                                      probes.get(worker, [])[:MAX_PROBES]))

    async def _deliver(self, worker: str, drops: list[str], probes: list[tuple[str, int]]) -> None:
        try:
            bodies = [ProbeBody.of(job_id, self.home.name, job.app, job.spec.ask(), count)
                      for job_id, count in probes if (job := self.store.job(job_id)) is not None]
            try:
                await self._send(worker, drops, bodies)
            except Unavailable as exc:
                if bodies:
                    log.info("probes of %d job(s) for %s lost (%s); placing them elsewhere",
                             len(bodies), worker, exc.message)
                    with self.store.tx(synced=False) as conn:
                        for body in bodies:
                            self.store.forget_probes(conn, body.job, worker)
                return  # a probe a drop missed is answered "drop" when it is taken
            except BodegaError as exc:
                log.warning("%s refused probes: %s", worker, exc.message)
                return
            if bodies:
                self.store.probes_delivered(worker, [(b.job, b.count) for b in bodies])
        finally:
            self._sending.discard(worker)

    async def _send(self, worker: str, drops: list[str], bodies: list[ProbeBody]) -> None:
        if self._singles.get(worker, -math.inf) <= self.store.clock():
            try:
                await self.peers.client(worker).probe_batch(
                    ProbeBatch(home=self.home.name, drops=drops, probes=bodies))
                return
            except NotFound:  # a runner of the version before batches: one call each
                log.info("worker %s takes probes one job at a time", worker)
                self._singles[worker] = self.store.clock() + SINGLES_FOR
        client = self.peers.client(worker)
        for job_id in drops:
            await client.drop_probes(job_id)
        for body in bodies:
            await client.probe(body)

    # -- retention ------------------------------------------------------------------------------
    def retain(self, now: float) -> None:
        finished = [Finished(job_id, app, at) for job_id, app, at in self.store.finished()]
        dropped = to_drop(finished, now, self.config.finished_ttl, self.config.keep_per_app)
        if dropped:  # one commit for all of them: a busy home drops hundreds at a time
            with self.store.tx() as conn:
                for job_id in dropped:
                    self.store.delete_job(conn, job_id)
        for job_id in dropped:
            self.home.changed(job_id)
        if dropped:
            log.info("dropped %d finished jobs (TTL %.0fs, %d kept per app)", len(dropped),
                     self.config.finished_ttl, self.config.keep_per_app)

    # -- orders to other workers -----------------------------------------------------------------
    def send_stops(self, orders: list[StopOrder]) -> None:
        for order in orders:
            self._spawn(self._stop(order))

    async def _stop(self, order: StopOrder) -> None:
        try:
            await self.peers.client(order.worker).stop_run(
                RunStop(job=order.job, task=order.task, grace=order.grace))
        except BodegaError as exc:  # its next renewal says stop
            log.info("stop of job %s task %d not delivered to %s: %s", order.job, order.task,
                     order.worker, exc.message)

    def send_drops(self, job_id: str, workers: list[str]) -> None:
        """Sent with each worker's next probes (``deliver_probes``), the upkeep woken for
        them. Not kept: a probe a drop never reached is answered "drop" when it is taken."""
        for worker in workers:
            self._drops.setdefault(worker, set()).add(job_id)
        if workers:
            self.wake.set()

    def _spawn(self, coro: object) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
