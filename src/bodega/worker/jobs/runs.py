"""A worker running bodega-pool tasks: its queue of probes, and taking tasks when it has room.

Late binding, the worker's half (Sparrow): homes place probes here
(``accept_batch``: a home's probes of a moment and the drops of those it no longer
needs, in one commit); they wait in arrival order (``probes_in``). Whenever room may
have changed (a machine's commit, a new probe, every second), the head probe
is served: room for up to ``count`` of its tasks is reserved in the ledger
(the same check-and-record any create goes through), the job's home is asked
for that many (``take``), and each task it gives is created as a machine on
this worker, under the reservation, with ``auto_destroy`` and restart ``no``:
cgroups, logs, events and ``/wait`` like any machine. A home that has nothing
left answers ``drop`` and the probe goes. The head waits for room (strict
arrival order); a probe whose home cannot be reached waits a little, the
others go on.

Every step is durable (``run_store.py``): a take carries the probe's
reference, so one asked again after a crash gets the same tasks; a machine is
created under the run's idempotency key, so never twice. Watching runs to
their end, reporting, renewals and stops are ``watch.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from bodega.jobs.slots import eligible, slot_key, take_now
from bodega.model.errors import BodegaError, Conflict, NotFound, StorageFull, Unavailable
from bodega.runtime.waits import within
from bodega.wire.internal.jobs.calls import (
    MAX_TAKE,
    HomeClaim,
    ProbeBatch,
    ProbeBody,
    Probed,
    ProbesHeld,
)
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.jobs.peers import JobPeers
from bodega.worker.jobs.run_store import ProbeRow, RunRow, RunStore
from bodega.worker.jobs.slots import Slot, SlotPool
from bodega.worker.jobs.watch import RunWatch
from bodega.worker.ops.machines import MachineService
from bodega.worker.store.ledger import CapacityRejected, Ledger

log = logging.getLogger("bodega.worker.jobs")

RESERVATION_TTL = 30.0  # room held between the reservation and the machine's create
HOME_RETRY = 1.0  # a probe whose home did not answer waits this long before asking again
OWNER = "bodega-jobs"  # the owner recorded on task machines
NO_SLOT = ""  # the slot shape of a job whose tasks each run as a machine of their own


class JobRunner:
    def __init__(self, store: RunStore, machines: MachineService, ledger: Ledger,
                 peers: JobPeers, watch: RunWatch,
                 slots: SlotPool | None = None) -> None:
        self.store = store
        self.slots = slots  # its ``enabled`` off (or None): a machine per task
        self._keys: dict[str, str] = {}  # job -> the slot shape of its tasks, once seen
        self.machines = machines
        self.ledger = ledger
        self.peers = peers
        self.watch = watch
        self.wake = asyncio.Event()
        self._taking: set[str] = set()  # jobs whose probe has a take under way
        self._retry_at: dict[str, float] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        machines.store.on_commit(lambda _resource: self.wake.set())  # room may have changed

    @property
    def name(self) -> str:
        return self.peers.name

    # -- what homes send ------------------------------------------------------------------------
    def accept(self, body: ProbeBody) -> Probed:
        held = self.store.add_probe(body.job, body.home, body.app, body.ask(), body.count,
                                    self.store.jobs.clock())
        self.wake.set()
        return Probed(job=body.job, queued=held)

    def drop(self, job_id: str) -> bool:
        return self.store.drop_probe(job_id)

    def accept_batch(self, body: ProbeBatch) -> ProbesHeld:
        dropped, held = self.store.hold_probes(
            body.home, body.drops, [(p.job, p.app, p.ask(), p.count) for p in body.probes],
            self.store.jobs.clock())
        if body.probes:
            self.wake.set()
        return ProbesHeld(dropped=dropped, probed=[Probed(job=p.job, queued=n)
                                                   for p, n in zip(body.probes, held, strict=True)])

    # -- serving the queue ----------------------------------------------------------------------
    async def run(self) -> None:
        if self.slots is not None:
            try:
                self.slots.recover()
            except Exception:  # the queue is served all the same; a slot left is swept
                log.exception("finding this worker's slots again failed")
        placed = [(slot, run) for run in self.store.runs()  # taken before a restart,
                  if run.state == "starting"  # not yet created
                  and (slot := self._start(run, [])) is not None]
        if placed and self.slots is not None:
            self.slots.run_now(placed)
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self.wake.wait(), 1.0)
            self.wake.clear()
            try:
                self.serve_queue()
            except Exception:
                log.exception("serving the job probe queue failed")

    def serve_queue(self) -> None:
        now = self.store.jobs.clock()
        if self.slots is not None:
            self.slots.sweep(now)
        for probe in self.store.probes():
            if probe.job_id in self._taking or self._retry_at.get(probe.job_id, 0.0) > now:
                continue
            want = min(probe.count, MAX_TAKE)
            key = self._keys.get(probe.job_id)
            slots = self.slots if self.slots is not None and self.slots.enabled and \
                key != NO_SLOT else None  # where this job's tasks would go, if anywhere
            placed = min(want, slots.room(key, probe.job_id)) if slots else 0
            # A new slot takes more than one task of a job whose tasks are short: the next
            # ones, written ahead.
            each = slots.depth(probe.job_id) if slots else 1
            reservations: list[str] = []
            while placed + each * len(reservations) < want and self.ledger.may_fit(probe.ask):
                try:
                    reservations.append(self.ledger.reserve(probe.ask, probe.app,
                                                            RESERVATION_TTL).id)
                except CapacityRejected:
                    break
            count = min(want, placed + each * len(reservations))
            if count == 0:
                if self.slots is not None and self.slots.idle():
                    # The room is held by idle slots: of this job's shape (a task of a job
                    # not seen yet may fit one), else they give way at its create (its
                    # slot's, or its own machine's for a job whose tasks run in none).
                    count = 1
                else:
                    return  # the head waits for room: arrival order is kept
            elif slots and not reservations and \
                    not take_now(count, slots.fill(key, probe.job_id), each):
                continue  # its slots are fed: its take waits until it brings enough
            self._taking.add(probe.job_id)
            self._spawn(self._take(probe, reservations, count))
            if count < probe.count:
                return  # room ran out on this one

    async def _take(self, probe: ProbeRow, reservations: list[str], count: int) -> None:
        body = HomeClaim(worker=self.name, mode="take", count=count, ref=probe.ref)
        free = list(reservations)
        try:
            try:
                answer = await self.peers.client(probe.home).claim_task(probe.job_id, body)
            except Unavailable as exc:
                log.info("job %s: home %s did not answer a take (%s)", probe.job_id,
                         probe.home, exc.message)
                self._retry_at[probe.job_id] = self.store.jobs.clock() + HOME_RETRY
                return
            except (NotFound, Conflict) as exc:  # gone, or not a job for this worker
                log.info("job %s: dropping its probes: %s", probe.job_id, exc.message)
                self.store.drop_probe(probe.job_id)
                return
            now = self.store.jobs.clock()
            given = [RunRow(job_id=t.job, index=t.task, attempt=t.attempt, home=probe.home,
                            app=t.app, config=t.config, lease_seconds=t.lease_seconds,
                            grace_seconds=t.grace_seconds, machine_id=None, state="starting",
                            stop=None, exit_code=None, reason=None, updated_at=now)
                     for t in answer.tasks if t.config is not None]
            runs = self.store.took(probe, given, answer.drop, now)
            if runs:
                self.watch.renew_soon.set()  # it looks at runs again, idle until now
            self._retry_at.pop(probe.job_id, None)
            placed = [(slot, run) for run in runs
                      if (slot := self._start(run, free)) is not None]
            if placed and self.slots is not None:
                self.slots.run_now(placed)  # one commit for the runs of slots that are up
        except BodegaError as exc:
            log.warning("job %s: take failed: %s", probe.job_id, exc.message)
        finally:
            self._taking.discard(probe.job_id)
            self._release(probe.job_id, free)
            self.wake.set()

    def _release(self, job_id: str, reservations: list[str]) -> None:
        """Give back the reservations a take did not use. One a full disk keeps (its release
        cannot be recorded) holds room only until its TTL passes: the ledger counts none
        after that, so the room comes back on its own."""
        kept = 0
        for reservation in reservations:
            try:
                self.ledger.release(reservation)
            except StorageFull:
                kept += 1
        if kept:
            log.warning("job %s: %d unused reservation(s) not released, the disk being full: "
                        "each stops holding room when its %.0fs TTL passes", job_id, kept,
                        RESERVATION_TTL)

    def _start(self, run: RunRow, free: list[str]) -> Slot | None:
        """Start a run taken: in a slot of its shape (one with a place, else a new one under
        a reservation of ``free``), or as a machine of its own. A slot that is up is
        returned, its run to be recorded and written there by the caller (``run_now``)."""
        if self.slots is None or not self.slots.enabled or not eligible(run.config):
            self._keys[run.job_id] = NO_SLOT
            self._spawn(self.launch(run, free.pop(0) if free else None))
            return None
        key = self._keys.get(run.job_id) or slot_key(run.app, run.config)  # a job's one shape
        self._keys[run.job_id] = key
        slot = self.slots.place(run, key) or self.slots.open(
            run, key, free.pop(0) if free else None)
        if self.slots.up(slot):
            return slot
        self._spawn(self.slots.run(slot, run))
        return None

    async def launch(self, run: RunRow, reservation: str | None) -> None:
        """Create the run's machine (once: under its idempotency key) and watch it. A create
        that fails, however it fails, ends the attempt here and now, so that the home hears
        of it at once instead of when its lease lapses."""
        current = self.store.run(run.seq)
        if current is None or current.state != "starting":
            return
        if current.stop:  # stopped before it started: given back
            self.watch.ended(current, None, f"stopped before it started ({current.stop})")
            return
        try:
            machine_id = await self._create(current, reservation)
        except CapacityRejected as exc:
            self.watch.ended(current, None, f"no room after all: {exc.message}")
            return
        except BodegaError as exc:
            self.watch.ended(current, 127, f"could not create its machine: {exc.message}")
            return
        except Exception as exc:
            log.exception("job %s task %d attempt %d: creating its machine failed",
                          current.job_id, current.index, current.attempt)
            self.watch.ended(current, 127, f"could not create its machine: {exc}")
            return
        self.watch.started(current, machine_id)

    async def _create(self, run: RunRow, reservation: str | None) -> str:
        request = CreateMachineBody(app=run.app, config=run.config.model_copy(deep=True),
                                    reservation_id=reservation,
                                    idempotency_key=run.idempotency_key)
        try:
            row, _ = await self.machines.creation.create(request, owner=OWNER)
        except CapacityRejected:
            raise
        except Conflict:
            if reservation is None:
                raise
            # The reservation expired or went (a restart between take and create): the
            # create checks room itself.
            row, _ = await self.machines.creation.create(
                request.model_copy(update={"reservation_id": None}), owner=OWNER)
        return row.id

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
