"""The tasks a worker runs, from their machine's start to their end reported at the home.

A task's machine is watched through the machine store's commits (the same
wake-ups as ``/wait``): the commit that records its exit says it ended, with
its exit code, before its ``auto_destroy`` tears it down, so its output is
kept here first (``bodega jobs logs``). The end is recorded (durably), then
reported to the job's home (``release``), again and again until the home has
heard. While it runs, its lease is renewed at the home (every third of the
lease, two seconds at most); the home answers keep running, stop (cancelled,
or past its deadline) or lost (the lease lapsed and the task went back to the
queue: it is stopped and not reported). A stop sends the config's stop
signal (SIGTERM by default here), then SIGKILL after the job's grace period.

The output kept outlives the task's machine (auto-destroyed when it ends) for the job
TTL (``output.py``), checked every ``PRUNE_EVERY``.

A machine stopped by anyone else (the worker's own shutdown) gives the task
back: not a failure, it runs again elsewhere at once.

Everything here acts on one run (one attempt, ``RunRow.seq``), and names its
attempt to the home: a task retried on this worker is taken while its failed
attempt's end may still be on its way, and the answer to that attempt's
renewal or a second copy of its report must never stop or end the next one.
Reports run beside the renewals, never before them, so that a slow report (its
machine's teardown) does not hold back the renewal of every other lease. Ends that
come together are reported together: one call and one commit at the home for all the
ends a worker has for it at that moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from bodega.jobs.slots import SLOT_KEY
from bodega.model.errors import BadRequest, BodegaError, NotFound
from bodega.model.states import MachineState as S
from bodega.runtime.waits import within
from bodega.wire.internal.jobs.calls import (
    MAX_RELEASES,
    HomeReleases,
    HomeRenew,
    ReleaseItem,
    RenewItem,
)
from bodega.worker.core.records import MachineRow
from bodega.worker.jobs.output import KeptOutput
from bodega.worker.jobs.peers import JobPeers
from bodega.worker.jobs.run_store import RunRow, RunStore
from bodega.worker.jobs.slots import SlotPool, stop_exit
from bodega.worker.ops.machines import MachineService
from bodega.worker.store import queries

log = logging.getLogger("bodega.worker.jobs")

ENDED = frozenset({S.STOPPED, S.FAILED, S.DESTROYING, S.DESTROYED, S.LAUNCH_FAILED})
TICK = 0.5
PRUNE_EVERY = 60.0
MAX_RENEW_EVERY = 2.0
ANNOUNCE_AFTER = 0.1  # seconds a start waits for others before the home is told of them
REPORT_EVERY = 0.05  # seconds between reports of ends to one home while ends stream in
REASON_ROOM = 500  # characters of an end's reason the home keeps
STOP_TRIES = 25  # a machine still starting refuses a stop: try again, 0.2 s apart


def end_of(row: MachineRow, stopped_by_us: bool,
           stop_exit: int | None = None) -> tuple[bool, int | None, str]:
    """(ended, exit code, why) of a task's machine; a code of None gives the task back.
    ``stop_exit``: the code its stop operation saw, for a machine stopped as asked."""
    exit_status = row.last_exit
    if exit_status is not None:
        if exit_status.oom_killed:
            why = "out of memory"
        elif exit_status.signal is not None:
            why = f"killed by signal {exit_status.signal}"
        else:
            why = f"exit code {exit_status.exit_code}"
        return True, exit_status.exit_code, why
    if row.state not in ENDED:
        return False, None, ""
    if row.state in (S.FAILED, S.LAUNCH_FAILED):
        return True, 127, "its machine failed to start (see the machine's events)"
    if stopped_by_us:  # the home counts the end as the stop asked for; the code says how
        return True, stop_exit, "stopped as asked" + (
            f" (exit code {stop_exit})" if stop_exit is not None else "")
    return True, None, "its machine was stopped"


class RunWatch:
    def __init__(self, store: RunStore, machines: MachineService, peers: JobPeers,
                 logs_dir: Path, machine_dir: Any, logs_ttl: float = 24 * 3600.0) -> None:
        self.store = store
        self.output = KeptOutput(logs_dir, logs_ttl)
        self._next_prune = 0.0
        self.machines = machines
        self.peers = peers
        self.machine_dir = machine_dir  # machine id -> its directory
        self.by_machine = {run.machine_id: run.seq for run in store.runs()
                           if run.machine_id and run.state == "running"}
        self._renewed: dict[int, float] = {}  # run -> when its lease was last renewed
        self._reporting: set[int] = set()  # runs whose end is being reported
        self._to_report: dict[str, list[RunRow]] = {}  # home -> ends to report, in order
        self._flushing: set[str] = set()  # homes a report is on its way to
        self._reported_at: dict[str, float] = {}  # home -> when the last report to it went
        self._tasks: set[asyncio.Task[Any]] = set()
        self._live = False
        self.renew_soon = asyncio.Event()
        self.slots: SlotPool | None = None  # runs in warm slots: their machine is the slot's
        machines.store.on_commit(self.on_machine)

    def attach(self, slots: SlotPool) -> None:
        self.slots = slots
        slots.ended = self.ended_in_slot
        slots.kept_late = self.kept_late
        slots.renew_soon = self.renew_soon.set

    def started(self, run: RunRow, machine_id: str) -> None:
        self.store.update(run, self.store.jobs.clock(), machine_id=machine_id, state="running")
        self.by_machine[machine_id] = run.seq
        self.renew_soon.set()  # the home learns where it runs
        self.on_machine(machine_id)  # it may have ended already
        current = self.store.run(run.seq)
        if current is not None and current.state == "running" and current.stop:
            # Told to stop while its machine was being created: stop the machine now.
            self._spawn(self.stop_run(current, current.stop))

    def leased(self, run: RunRow) -> None:
        """A run its home (this worker) started at the job's submit: the home leased it and
        knows its machine as of then, so it is never announced, only renewed in its turn."""
        self._renewed[run.seq] = run.updated_at

    def on_machine(self, machine_id: str) -> None:
        """A machine's commit: if it is a task's and it ended, record the end."""
        seq = self.by_machine.get(machine_id)
        if seq is None:
            return
        row = queries.get_machine(self.machines.store.db, machine_id)
        run = self.store.run(seq)
        if row is None or run is None or run.state == "ended":
            return
        if SLOT_KEY in (row.config.metadata or {}):
            return  # a slot's: its runs end as the slot reads them
        ended, code, why = end_of(row, run.stop is not None, stop_exit(self.machines, machine_id))
        if ended:
            self.keep_logs(run, machine_id)
            self.ended(run, code, why)

    def ended(self, run: RunRow, code: int | None, why: str) -> None:
        self.store.update(run, self.store.jobs.clock(), state="ended", exit_code=code,
                          reason=why)
        if run.machine_id:
            self.by_machine.pop(run.machine_id, None)
        log.info("job %s task %d attempt %d ended: %s", run.job_id, run.index, run.attempt, why)
        ended = self.store.run(run.seq)
        if ended is not None and self._live:
            self.report(ended)

    def ended_in_slot(self, run: RunRow, code: int | None, why: str,
                      output: Path | None) -> bool:
        """A run in a slot ended: its output (a file of its own there) is kept, then the
        end recorded. True when that output was empty: its file is left there, the slot's
        to use again (``spare_outputs.py``)."""
        empty = output is not None and self.output.keep_file(
            run.job_id, run.index, output, self.store.jobs.clock())
        self.ended(run, code, why)
        return empty

    def kept_late(self, job_id: str, task: int, output: Path) -> None:
        """A slot's output kept as empty was written after its run ended (by a process the
        task left behind): kept as the task's output after all."""
        self.output.keep_file(job_id, task, output, self.store.jobs.clock())

    def keep_logs(self, run: RunRow, machine_id: str) -> None:
        """The machine's output, copied before its teardown removes it."""
        self.output.keep_machine_log(run.job_id, run.index,
                                     Path(self.machine_dir(machine_id)) / "logs")

    def logs(self, job_id: str, task: int) -> bytes:
        """What the task printed: as it runs, from its slot's or machine's file; once it
        ended, what was kept."""
        run = self.store.latest(job_id, task)
        in_slot = self.slots.output(run) if self.slots and run and run.state == "running" \
            else None
        if in_slot is not None:
            with contextlib.suppress(OSError):
                return in_slot.read_bytes()
        elif run is not None and run.machine_id and run.state == "running":
            live = Path(self.machine_dir(run.machine_id)) / "logs" / "machine.log"
            with contextlib.suppress(OSError):
                return live.read_bytes()
        return self.output.read(job_id, task)

    # -- reporting, renewing --------------------------------------------------------------------
    def report(self, run: RunRow) -> None:
        """Tell the home how the attempt ended, with the other ends ready for it then (one
        call, one commit there). One report of a run at a time: a second copy could reach
        the home after it gave the task back to this worker as its next attempt."""
        if run.seq in self._reporting:
            return
        self._reporting.add(run.seq)
        self._to_report.setdefault(run.home, []).append(run)
        if run.home not in self._flushing:
            self._flushing.add(run.home)
            self._spawn(self._flush(run.home))

    async def _flush(self, home: str) -> None:
        loop = asyncio.get_running_loop()
        try:
            await asyncio.sleep(0)  # the ends read together go together
            while self._to_report.get(home):
                # While ends stream in, one report per REPORT_EVERY carries them all (a
                # call and a commit at the home cost about what a few ends do); an end
                # after a quiet spell goes at once.
                since = loop.time() - self._reported_at.get(home, -REPORT_EVERY)
                if since < REPORT_EVERY:
                    await asyncio.sleep(REPORT_EVERY - since)
                self._reported_at[home] = loop.time()
                waiting = self._to_report.pop(home)
                batch, rest = waiting[:MAX_RELEASES], waiting[MAX_RELEASES:]
                if rest:
                    self._to_report[home] = rest
                await self._report(home, batch)
        finally:
            self._flushing.discard(home)

    async def _report(self, home: str, runs: list[RunRow]) -> None:
        heard: list[RunRow] = []
        try:
            heard = [r for r in runs if r.stop == "lost"]  # given away: nothing to say
            told = [r for r in runs if r.stop != "lost"]
            if told:
                heard += await self._release(home, told)
            if heard:
                self.store.forget_all(heard)
        except Exception:
            log.exception("reporting %d end(s) to %s failed", len(runs), home)
            heard = []
        finally:
            for r in runs:  # what was not heard is reported again by the tick
                self._reporting.discard(r.seq)
        for r in heard:
            self._renewed.pop(r.seq, None)
            if r.machine_id and not (self.slots is not None and self.slots.holds(r.machine_id)):
                self._spawn(self._destroy(r.machine_id))  # one that did not destroy itself

    async def _release(self, home: str, told: list[RunRow]) -> list[RunRow]:
        """The runs whose end the home took (or need not: no longer ours, or gone)."""
        body = HomeReleases(worker=self.peers.name, items=[
            ReleaseItem(job=r.job_id, task=r.index, exit_code=r.exit_code,
                        reason=(r.reason or "")[:REASON_ROOM] or None, attempt=r.attempt,
                        machine_id=r.machine_id)
            for r in told])
        try:
            try:
                answer = await self.peers.client(home).release_tasks(body)
            except BadRequest:
                if not any(item.machine_id for item in body.items):
                    raise
                # A home of an earlier version refuses an end that names its machine:
                # told again without (a cluster is upgraded one daemon at a time).
                body = body.model_copy(update={"items": [
                    item.model_copy(update={"machine_id": None}) for item in body.items]})
                answer = await self.peers.client(home).release_tasks(body)
        except BodegaError as exc:
            log.info("%d end(s) not reported to %s yet: %s", len(told), home, exc.message)
            return []
        for r, result in zip(told, answer.results, strict=False):
            if result.status != "ok":
                log.info("job %s task %d attempt %d: the home did not take the end: %s",
                         r.job_id, r.index, r.attempt, result.detail)
        return told[:len(answer.results)]

    async def _destroy(self, machine_id: str) -> None:
        with contextlib.suppress(BodegaError):
            await self.machines.destroy(machine_id, force=True, lease_override=True)

    async def run(self) -> None:
        self._live = True
        wait = TICK
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self.renew_soon.wait(), wait)
            if self.renew_soon.is_set():
                # Runs that start together are announced together; one that ends within
                # the window is told by its end (which names its machine) instead. A start
                # meanwhile sets it again: its run is looked at on the next turn.
                self.renew_soon.clear()
                await asyncio.sleep(ANNOUNCE_AFTER)
            try:
                wait = max(0.01, await self.tick())
            except Exception:
                log.exception("job run upkeep failed")
                wait = TICK

    async def tick(self) -> float:
        """Report what ended; renew the leases due (a third of the lease, at most
        ``MAX_RENEW_EVERY``), and announce the runs that have run ``ANNOUNCE_AFTER`` with no
        renewal yet: the home learns where they run (one that ends sooner names its machine
        in its end). Returns how long until the next run not yet announced is due (at most
        ``TICK``); with no run here, how long until the next prune: an idle worker reads
        nothing until a take records runs (``JobRunner`` wakes us then)."""
        now = self.store.jobs.clock()
        if now >= self._next_prune:
            self._next_prune = now + PRUNE_EVERY
            self.output.prune(now)
        due: dict[str, list[RunRow]] = {}
        announce_in = TICK
        runs = self.store.runs()
        if not runs and not self._to_report:
            return self._next_prune - now
        for run in runs:
            if run.state == "ended":
                self.report(run)
                continue
            renewed = self._renewed.get(run.seq)
            if renewed is None:  # announced once it has run a while: a short one never is
                age = now - run.updated_at
                if age >= ANNOUNCE_AFTER:
                    due.setdefault(run.home, []).append(run)
                else:
                    announce_in = min(announce_in, ANNOUNCE_AFTER - age)
            elif now - renewed >= min(run.lease_seconds / 3, MAX_RENEW_EVERY):
                due.setdefault(run.home, []).append(run)
        await asyncio.gather(*(self._renew(home, runs) for home, runs in due.items()))
        return announce_in

    async def _renew(self, home: str, runs: list[RunRow]) -> None:
        body = HomeRenew(worker=self.peers.name, tasks=[
            RenewItem(job=r.job_id, task=r.index, machine_id=r.machine_id, attempt=r.attempt)
            for r in runs])
        try:
            answer = await self.peers.client(home).renew_leases(body)
        except BodegaError as exc:  # keep running: the lease was given for this
            log.info("renewing %d leases at %s failed: %s", len(runs), home, exc.message)
            return
        now = self.store.jobs.clock()
        for asked, result in zip(runs, answer.results, strict=False):
            run = self.store.run(asked.seq)  # as it is now: it may have ended meanwhile
            if run is None or run.state == "ended":
                continue
            self._renewed[run.seq] = now
            if result.answer.verdict == "stop" and run.stop is None:
                self._spawn(self.stop_run(run, "cancelled"))
            elif result.answer.verdict == "lost" and run.stop != "lost":
                log.info("job %s task %d attempt %d: the lease was lost; stopping it",
                         run.job_id, run.index, run.attempt)
                self._spawn(self.stop_run(run, "lost"))

    async def stop(self, job_id: str, task: int, grace: float, why: str) -> bool:
        """Stop a task's machine: SIGTERM, SIGKILL after ``grace``; False if not running here."""
        run = self.store.latest(job_id, task, live=True)
        if run is None:
            return False
        return await self.stop_run(run, why, grace)

    async def stop_run(self, run: RunRow, why: str, grace: float | None = None) -> bool:
        """Stop one run's machine (SIGTERM, then SIGKILL after the grace period)."""
        grace = run.grace_seconds if grace is None else grace
        current = self.store.run(run.seq)
        if current is None or current.state == "ended":
            return False
        run = current
        self.store.update(run, self.store.jobs.clock(), stop=why)
        if run.machine_id is None:
            return True  # not created yet: the launch sees the stop
        if self.slots is not None and self.slots.holds(run.machine_id):
            with contextlib.suppress(BodegaError):
                await self.slots.stop(run, grace)
            return True
        for _ in range(STOP_TRIES):
            try:
                await self.machines.stop(run.machine_id, signal="SIGTERM", timeout=grace,
                                         lease_override=True)
                return True
            except NotFound:
                return True
            except BodegaError:
                await asyncio.sleep(0.2)
        log.warning("job %s task %d: its machine %s would not stop", run.job_id, run.index,
                    run.machine_id)
        return True

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self._live = False
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
