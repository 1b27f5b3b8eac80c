"""A worker's warm slots: machines kept up to run bodega-pool tasks one after another.

The rules (what a slot runs, its program, which tasks share one) are
``bodega.jobs.slots``; this is the I/O. A slot is created like a task's machine
(under the take's reservation, so the ledger counts it as one task's room) and
kept while tasks come: each task placed in it is recorded (its run's machine is
the slot's, in one commit) before its line is written to the slot's ``tasks``
FIFO, and its end is read back from ``results`` when the slot writes to ``done``.
A slot holds the runs of one job at a time: one running, and for a job whose tasks are
short the next ones already written (``depth``: a quarter of a second of work or so,
at most ``MAX_DEPTH`` in all); stopping a slot stops them all, and those not yet running
are given back, not failed. The one exception is a one-task job written at its submit
behind another job's task, its shape's tasks having run short here (``bodega.jobs.seats``):
a stop of that job waits for the task ahead to end, so that no job is stopped for
another's.
An idle slot goes after ``LINGER`` seconds, or at once when a task of another
shape or any machine (a create, a start, an update) needs its room: the worker shows
idle slots' room as free, and gives it on demand (``make_room``), so a warm slot never
stands between a machine and its host.

A worker killed at any instant: its slots (machines) keep running their tasks and
append their ends to ``results``; the worker started again finds each slot by its
metadata, reads ``results`` from the start (ends it already reported are of runs it
has forgotten), and writes again the lines of runs it had recorded in a slot but
not seen end (the slot skips a run it already started). A slot that ended
meanwhile gives its unfinished runs back. A slot running the loop before this version's
(the worker was upgraded) is given those lines in that loop's form and no new task.

The module is long because a slot's life is one idea with one state: placing runs in it,
its machine's creation, writing its lines, reading its ends, giving way, its end and
finding it again after a restart all read and change the same ``Slot``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bodega.jobs.seats import BEHIND_AFTER, Seat, free_seat
from bodega.jobs.slots import (
    LOOP,
    SHORT,
    SLOT_KEY,
    depth,
    dispatch_line,
    loop_of,
    results,
    slot_config,
    task_line,
)
from bodega.model.capacity import Ask
from bodega.model.errors import BodegaError, NotFound
from bodega.model.machine_config import MachineConfig
from bodega.model.states import MachineState as S
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.core.payloads import EndsRun
from bodega.worker.core.records import MachineRow
from bodega.worker.jobs.run_store import RunRow, RunStore
from bodega.worker.jobs.spare_outputs import KeptLate, Spare, SpareOutputs
from bodega.worker.ops.machines import MachineService
from bodega.worker.store import queries
from bodega.worker.store.ledger import CapacityRejected

log = logging.getLogger("bodega.worker.jobs")

LINGER = 30.0  # seconds an idle slot waits for a task before it goes (it gives way at once)
READY_WAIT = 10.0  # seconds a new slot has to make its FIFOs
READY_LOOK = 0.05  # seconds between looks at a new slot's machine while it makes them
SWEEP_EVERY = 1.0  # seconds between looks at busy slots that did not wake the worker
RETIRE_GRACE = 5.0  # seconds an idle slot's loop has to end before SIGKILL
ROOM_TRIES = 3  # idle slots stopped to make room for a slot created without a reservation
LIVE = frozenset({S.CREATED, S.STARTING, S.STARTED})
GONE = frozenset({S.STOPPED, S.FAILED, S.DESTROYING, S.DESTROYED, S.LAUNCH_FAILED,
                  S.REPLACED})  # a slot's program has ended: what it finished is in results

# run, code, why, its output -> whether that output was empty and its file left for the slot
Ended = Callable[[RunRow, int | None, str, Path | None], bool]


def stop_exit(machines: MachineService, machine_id: str) -> int | None:
    """The exit code a machine's last stop saw (SIGTERM: 143), if it had one."""
    op = machines.store.last_operation(machine_id)
    exit_event = op.payload.exit if op is not None and isinstance(op.payload, EndsRun) \
        else None
    code = exit_event.get("exit_code") if exit_event else None
    return code if isinstance(code, int) and code >= 0 else None


@dataclass
class Slot:
    key: str
    app: str
    ask: Ask | None = None  # the room its machine holds (None: not known, never given way)
    machine_id: str | None = None  # None while its machine is being created
    directory: Path | None = None
    runs: list[int] = field(default_factory=list)  # its runs' seqs, in the order written
    began: float = 0.0  # when its running task was written, or the one before it ended
    job: str | None = None  # the job of its runs, while it has some
    idle_since: float = 0.0
    retiring: bool = False
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    failed: str | None = None  # why its machine could not be had
    failed_code: int | None = 127  # its runs' exit code then (None: no room, given back)
    offset: int = 0  # how far ``results`` was read
    # Runs written behind another job's task, to stop once they run (stopping the slot
    # before would stop that task): run -> the stop's grace.
    stop_at_head: dict[int, float] = field(default_factory=dict)
    spares: SpareOutputs = field(default_factory=SpareOutputs)  # empty outputs, for later runs
    tasks_fd: int | None = None
    done_fd: int | None = None
    loop: int = LOOP  # the version of the slot loop it runs: an earlier one holds only
    # the runs it held when it was found after an upgrade (``loop_of``)

    def room_for(self, job: str, holds: int) -> int:
        """Places for ``job``'s tasks, a slot holding ``holds`` of them (``depth``): one in
        an idle slot; more, written ahead, only for a job whose tasks are short: a long task
        must not hold back the next while another worker has room for it."""
        if self.retiring or self.failed or (self.runs and self.job != job):
            return 0
        return max(0, holds - len(self.runs))


class SlotPool:
    def __init__(self, store: RunStore, machines: MachineService, owner: str,
                 home_of: Callable[[str, str | None], Path | None], *,
                 enabled: bool = True) -> None:
        self.store = store
        # Whether tasks are placed in slots: off by the setting, or once a slot showed that
        # machines here have no directory of their own (a worker that is not root).
        self.enabled = enabled
        self.machines = machines
        self.owner = owner
        self.home_of = home_of  # a machine's directory as its program sees it at its start
        self.slots: list[Slot] = []
        self.short: dict[str, float] = {}  # job -> seconds its last task took, under SHORT
        self.streak: dict[str, int] = {}  # shape -> its last ends in a row under SHORT
        self._swept_at = 0.0
        self.ended: Ended = lambda *_: False
        self.kept_late: KeptLate = lambda *_: None
        self.freed: Callable[[], None] = lambda: None  # room or a place may have come free
        self.renew_soon: Callable[[], None] = lambda: None
        self._tasks: set[asyncio.Task[None]] = set()
        machines.store.on_commit(self.on_machine)

    # -- where a run goes ---------------------------------------------------------------------
    def depth(self, job: str) -> int:
        """How many of ``job``'s runs one slot holds (``bodega.jobs.slots.depth``)."""
        return depth(self.short.get(job))

    def room(self, key: str | None, job: str) -> int:
        """Places for ``job``'s tasks of shape ``key`` in slots that exist."""
        if key is None:
            return 0
        holds = self.depth(job)
        return sum(slot.room_for(job, holds) for slot in self.slots if slot.key == key)

    def fill(self, key: str | None, job: str) -> list[int]:
        """How many runs each slot of shape ``key`` that may hold ``job``'s holds now."""
        return [len(s.runs) for s in self.slots
                if s.key == key and not s.retiring and not s.failed
                and (not s.runs or s.job == job)]

    def idle(self) -> list[Slot]:
        return [s for s in self.slots if not s.runs and not s.retiring and s.machine_id]

    def holds(self, machine_id: str | None) -> bool:
        return machine_id is not None and any(s.machine_id == machine_id for s in self.slots)

    def place(self, run: RunRow, key: str) -> Slot | None:
        """A slot of ``key`` with a place for ``run``: the emptiest."""
        fits = [s for s in self.slots
                if s.key == key and s.room_for(run.job_id, self.depth(run.job_id)) > 0]
        if not fits:
            return None
        slot = min(fits, key=lambda s: len(s.runs))
        self._hold(slot, run)
        return slot

    def open(self, run: RunRow, key: str, reservation: str | None) -> Slot:
        """A new slot for ``run``: its machine is created in the background."""
        slot = Slot(key=key, app=run.app, ask=Ask.for_config(run.config))
        self.slots.append(slot)
        self._hold(slot, run)
        self._spawn(self._create(slot, run.config, reservation))
        return slot

    def free(self, key: str) -> Slot | None:
        """An idle slot of shape ``key`` that is up, for a job started at its submit
        (``bodega.jobs.seats``); it stays free until ``seated`` holds it, as long as no
        ``await`` comes between."""
        if not self.enabled:
            return None
        chosen = free_seat([Seat(key=s.key, up=self.up(s), held=len(s.runs),
                                 retiring=s.retiring, idle_since=s.idle_since, began=s.began)
                            for s in self.slots], key, self.store.jobs.clock(),
                           short=self.streak.get(key, 0) >= BEHIND_AFTER)
        return None if chosen is None else self.slots[chosen]

    def seated(self, slot: Slot, run: RunRow) -> None:
        """A run committed in ``slot`` at its job's submit: held there at once, its line
        written once the submit's answer is on its way (writing it wakes the slot's
        shell, which the host may run before the answer goes out)."""
        self._hold(slot, run)
        self.renew_soon()
        try:
            asyncio.get_running_loop().call_soon(self._write, slot, run)
        except RuntimeError:  # no loop: written now
            self._write(slot, run)

    def _hold(self, slot: Slot, run: RunRow) -> None:
        if not slot.runs:
            slot.began = self.store.jobs.clock()
        slot.runs.append(run.seq)
        slot.job = run.job_id

    # -- a slot's machine ---------------------------------------------------------------------
    async def _create(self, slot: Slot, config: MachineConfig, reservation: str | None) -> None:
        request = CreateMachineBody(app=slot.app, config=slot_config(slot.app, config),
                                    reservation_id=reservation)
        try:
            row = await self._created(request)
            slot.machine_id = row.id
            directory = self.home_of(row.id, row.private_ip)
            if directory is None:
                self.enabled = False  # the next tasks run as machines of their own
                raise CapacityRejected("machines here run as the worker's user, with no "
                                       "directory of their own: no slots on this worker")
            slot.directory = directory
            await self._await_ready(slot)
            self._attach(slot)
            log.info("slot %s for app %s is up", row.id, slot.app)
        except Exception as exc:
            slot.failed = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            slot.failed_code = None if isinstance(exc, CapacityRejected) else 127
            log.warning("a slot for app %s could not be had: %s", slot.app, slot.failed)
            self.slots.remove(slot)
            if slot.machine_id:
                self._spawn(self._destroy(slot.machine_id))
        finally:
            slot.ready.set()

    async def _created(self, request: CreateMachineBody) -> MachineRow:
        """The slot's machine. Without a reservation, room held by idle slots of other
        shapes is made: one is stopped, and the create tried again once it has gone."""
        for _ in range(ROOM_TRIES):
            try:
                row, _ = await self.machines.creation.create(request, owner=self.owner)
                return row
            except CapacityRejected:
                idle = self.idle()
                if request.reservation_id is not None or not idle:
                    raise
                await self._stop(idle[0])
                await asyncio.sleep(0.05)
        row, _ = await self.machines.creation.create(request, owner=self.owner)
        return row

    async def _await_ready(self, slot: Slot) -> None:
        assert slot.directory is not None
        assert slot.machine_id is not None
        ready = slot.directory / "ready"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_WAIT
        looked = 0.0
        while not ready.exists():
            now = loop.time()
            if now - looked >= READY_LOOK:  # a stat is cheap; reading the machine is not
                looked = now
                row = queries.get_machine(self.machines.store.db, slot.machine_id)
                if row is None or row.state not in LIVE:
                    raise BodegaError("its machine ended before it was ready")
            if now > deadline:
                raise BodegaError(f"its machine made no FIFOs in {READY_WAIT:.0f}s")
            await asyncio.sleep(0.002)

    def _attach(self, slot: Slot) -> None:
        """Open the slot's FIFOs; its ``done`` is held open both ways, so its writes never
        block while this worker lives and it never reads an end of file. A slot whose shell
        is gone (nobody reads ``tasks``) raises OSError, nothing left open."""
        assert slot.directory is not None
        slot.done_fd = os.open(slot.directory / "done", os.O_RDWR | os.O_NONBLOCK)
        try:
            slot.tasks_fd = os.open(slot.directory / "tasks", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            os.close(slot.done_fd)
            slot.done_fd = None
            raise
        asyncio.get_running_loop().add_reader(slot.done_fd, self._on_done, slot)

    def _detach(self, slot: Slot) -> None:
        if slot.done_fd is not None:
            asyncio.get_running_loop().remove_reader(slot.done_fd)
        for fd in (slot.done_fd, slot.tasks_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        slot.done_fd = slot.tasks_fd = None

    # -- running a task -----------------------------------------------------------------------
    def run_now(self, placed: list[tuple[Slot, RunRow]]) -> None:
        """Runs just taken (recorded, nothing awaited since) placed in slots that are up:
        recorded in their slots in one commit, then their lines written."""
        for slot, run in [(slot, run) for slot, run in placed if run.stop]:
            self._let_go(slot, run.seq)  # told to stop before a restart, not yet started
            self.ended(run, None, f"stopped before it started ({run.stop})", None)
        placed = [(slot, run) for slot, run in placed if not run.stop]
        now = self.store.jobs.clock()
        try:
            self.store.running([(run, slot.machine_id or "") for slot, run in placed], now)
        except Exception:  # a full disk: each is tried on its own, as a slot not yet up's
            log.exception("recording %d run(s) in their slots failed", len(placed))
            for slot, run in placed:
                self._spawn(self.run(slot, run))
            return
        self.renew_soon()
        for slot, run in placed:
            self._write(slot, replace(run, machine_id=slot.machine_id, state="running",
                                      updated_at=now))

    def up(self, slot: Slot) -> bool:
        """Whether the slot's machine is up and its lines can be written now."""
        return slot.ready.is_set() and slot.failed is None and slot.machine_id is not None \
            and slot.tasks_fd is not None

    async def run(self, slot: Slot, run: RunRow) -> None:
        """Record ``run`` in ``slot`` (committed before its line is written) and write it."""
        await slot.ready.wait()
        current = self.store.run(run.seq)
        if current is None or current.state == "ended":
            self._let_go(slot, run.seq)
            return
        if slot.failed is not None or slot.machine_id is None:
            self._let_go(slot, run.seq)
            self.ended(current, slot.failed_code,
                       f"could not create its slot machine: {slot.failed}", None)
            return
        if current.stop:
            self._let_go(slot, run.seq)
            self.ended(current, None, f"stopped before it started ({current.stop})", None)
            return
        self.store.update(current, self.store.jobs.clock(), machine_id=slot.machine_id,
                          state="running")
        self.renew_soon()
        self._write(slot, current)

    def _write(self, slot: Slot, run: RunRow, *, fresh: bool = True) -> None:
        """``fresh``: the run's line was never written before (not again after a restart:
        the slot may have run it, and its output file is its own)."""
        line = dispatch_line(run.seq, run.config) if slot.loop == LOOP else \
            task_line(slot.loop, run.seq, run.config)
        if fresh and slot.spares and slot.directory is not None:
            slot.spares.lend(slot.directory / "out" / f"{run.seq}.log",
                             self.store.jobs.clock(), self.kept_late)
        try:
            assert slot.tasks_fd is not None
            if os.write(slot.tasks_fd, line) != len(line):  # never: a line fits PIPE_BUF
                raise OSError("the line was written in part")
        except (OSError, AssertionError) as exc:
            self._let_go(slot, run.seq)
            self.ended(run, None, f"its slot could not be given the task: {exc}", None)

    def _on_done(self, slot: Slot) -> None:
        with contextlib.suppress(OSError):
            while os.read(slot.done_fd or -1, 4096):
                pass
        self.read_results(slot)

    def read_results(self, slot: Slot) -> None:
        """The ends the slot appended since the last look."""
        if slot.directory is None:
            return
        try:
            with (slot.directory / "results").open("rb") as f:
                f.seek(slot.offset)
                text = f.read().decode(errors="replace")
        except FileNotFoundError:
            return
        now = self.store.jobs.clock()
        for seq, code in results(text):
            run = self.store.run(seq)
            self._learn(slot.key, run.job_id if run is not None else slot.job,
                        now - slot.began)
            slot.began = now
            self._let_go(slot, seq)
            if run is not None and run.state != "ended":
                why = f"exit code {code}" if code < 128 else f"killed by signal {code - 128}"
                output = slot.directory / "out" / f"{seq}.log"
                if self.ended(run, code, why, output):
                    slot.spares.left(Spare(output, run.job_id, run.index, now), self.kept_late)
            slot.offset += len(f"{seq} {code}\n")  # once its end is recorded
        if slot.runs and (grace := slot.stop_at_head.pop(slot.runs[0], None)) is not None:
            self._spawn(self._stop(slot, grace))  # a job written behind, to stop: it runs now
        self.freed()

    def _learn(self, key: str, job: str | None, took: float) -> None:
        """How long a task of ``job`` (shape ``key``) took, from its start or the end
        before it: whether its job's next tasks are written ahead (``short``), and whether
        a job of its shape may be written behind a task (``streak``)."""
        if took >= SHORT:
            self.streak[key] = 0
            if job is not None:
                self.short.pop(job, None)
            return
        self.streak[key] = min(self.streak.get(key, 0) + 1, BEHIND_AFTER)
        if job is not None:
            if len(self.short) >= 10_000:  # jobs long gone: they are learnt again
                self.short.clear()
            self.short[job] = took

    def sweep(self, now: float) -> None:
        """Idle slots past ``LINGER`` go; once a second each busy slot is looked at as if it
        had woken the worker (an end or a machine's end never waits on a wake-up)."""
        self.retire_idle(now)
        if now - self._swept_at < SWEEP_EVERY:
            return
        self._swept_at = now
        for slot in list(self.slots):
            if slot.runs and slot.tasks_fd is not None and slot.machine_id is not None:
                try:
                    self.read_results(slot)
                    self.on_machine(slot.machine_id)
                except Exception:
                    log.exception("looking at slot %s failed", slot.machine_id)

    def _let_go(self, slot: Slot, seq: int) -> None:
        slot.stop_at_head.pop(seq, None)
        with contextlib.suppress(ValueError):
            slot.runs.remove(seq)
        if not slot.runs:
            slot.job = None
            slot.idle_since = self.store.jobs.clock()

    def output(self, run: RunRow) -> Path | None:
        """Where a run in a slot writes its output while it runs."""
        for slot in self.slots:
            if slot.machine_id == run.machine_id and slot.directory is not None:
                return slot.directory / "out" / f"{run.seq}.log"
        return None

    # -- a slot's end ---------------------------------------------------------------------------
    def on_machine(self, machine_id: str) -> None:
        slot = next((s for s in self.slots if s.machine_id == machine_id), None)
        if slot is None or slot.tasks_fd is None:
            return
        row = queries.get_machine(self.machines.store.db, machine_id)
        if row is not None and row.state not in GONE:
            return
        self.read_results(slot)  # what it finished before it went
        self._detach(slot)
        self.slots.remove(slot)
        killed = stop_exit(self.machines, machine_id)
        own_end = row.last_exit.exit_code if row is not None and row.last_exit else None
        for position, seq in enumerate(list(slot.runs)):
            run = self.store.run(seq)
            self._let_go(slot, seq)
            if run is None or run.state == "ended":
                continue
            output = slot.directory / "out" / f"{seq}.log" if slot.directory else None
            if run.stop and position == 0:  # the one running, killed with its slot
                self.ended(run, killed, "stopped as asked" + (
                    f" (exit code {killed})" if killed is not None else ""), output)
            elif position == 0 and not slot.retiring and own_end is not None:
                # The slot ended under its task, unasked (the task killed it, or memory ran
                # out): the task's attempt, as a machine of its own would have failed.
                self.ended(run, own_end, f"its slot machine ended (exit code {own_end})",
                           output)
            else:  # never started, or its slot was stopped under it: given back
                self.ended(run, None, "its slot machine stopped", output)
        if row is not None and row.state not in (S.DESTROYING, S.DESTROYED):
            self._spawn(self._destroy(machine_id))
        self.freed()

    # -- giving way to machines -----------------------------------------------------------------
    def giving_way(self) -> list[Ask]:
        """The room idle slots hold: free for any machine that needs it (``make_room``), so
        the worker shows it as free."""
        return [slot.ask for slot in self.idle() if slot.ask is not None]

    async def make_room(self, ask: Ask, exclude_machine: str | None = None) -> bool:
        """Idle slots give way to a machine that needs their room: stopped, longest idle
        first, each waited for until it holds no room, until ``ask`` fits (beside what is
        held but ``exclude_machine``'s own room) or none is left idle; none is stopped
        when all of them would not be enough. True when one went. This is what lets a
        slot stay warm for ``LINGER`` seconds: it never stands between a machine and its
        host."""
        ledger = self.machines.ledger
        if not ledger.may_fit(ask, exclude_machine, freed=self.giving_way()):
            return False
        went = False
        while not ledger.may_fit(ask, exclude_machine):
            idle = [s for s in self.idle() if s.ask is not None]  # as they are now: a
            if not idle:  # take may have given one a task while the last one stopped
                break
            slot = min(idle, key=lambda s: s.idle_since)
            slot.retiring = True
            log.info("idle slot %s gives way to a machine that needs its room",
                     slot.machine_id)
            await self._stop(slot)
            if not slot.retiring:  # its stop was refused: it is idle again, left alone
                break
            await self._let_go_of_room(slot)
            went = True
        return went

    async def _let_go_of_room(self, slot: Slot) -> None:
        """Until the slot's machine holds no room (its stop has ended), within the grace."""
        assert slot.machine_id is not None
        deadline = asyncio.get_running_loop().time() + RETIRE_GRACE + 1.0
        while asyncio.get_running_loop().time() < deadline:
            row = queries.get_machine(self.machines.store.db, slot.machine_id)
            if row is None or not row.holds_compute:
                return
            await asyncio.sleep(0.01)

    def retire_idle(self, now: float, *, all_idle: bool = False) -> int:
        """Stop the slots idle past ``LINGER`` (every idle one with ``all_idle``)."""
        gone = 0
        for slot in self.idle():
            if all_idle or now - slot.idle_since >= LINGER:
                slot.retiring = True  # at once: a sweep before its stop runs skips it
                gone += 1
                self._spawn(self._stop(slot))
        return gone

    async def _stop(self, slot: Slot, grace: float = RETIRE_GRACE) -> None:
        assert slot.machine_id is not None
        slot.retiring = True
        try:
            await self.machines.stop(slot.machine_id, signal="SIGTERM", timeout=grace,
                                     lease_override=True)
        except NotFound:
            pass
        except BodegaError as exc:
            log.info("slot %s would not stop: %s", slot.machine_id, exc.message)
            slot.retiring = False  # idle again: the next sweep tries again

    async def stop(self, run: RunRow, grace: float) -> None:
        """Stop the slot ``run`` is in, with its task (and the next, given back). A run
        written behind another job's task is stopped once it runs, not before: stopping
        the slot now would stop that other job's task."""
        slot = next((s for s in self.slots if s.machine_id == run.machine_id), None)
        if slot is None:
            return
        if run.seq in slot.runs[1:]:
            ahead = self.store.run(slot.runs[0])
            if ahead is not None and ahead.job_id != run.job_id:
                slot.stop_at_head[run.seq] = grace
                return
        await self._stop(slot, grace)

    async def _destroy(self, machine_id: str) -> None:
        with contextlib.suppress(BodegaError):
            await self.machines.destroy(machine_id, force=True, lease_override=True)

    # -- after a restart ------------------------------------------------------------------------
    def recover(self) -> None:
        """Find this worker's slots again: read what each finished while the worker was
        down, write again what it may not have been given, end the runs of one that went;
        idle ones go (a task brings a slot back)."""
        held: dict[str, list[RunRow]] = {}
        for run in self.store.runs():
            if run.state == "running" and run.machine_id:
                held.setdefault(run.machine_id, []).append(run)
        for listed in queries.list_machines(self.machines.store.db):
            if SLOT_KEY in (listed.config.metadata or {}):
                held.setdefault(listed.id, [])
        for machine_id, mine in held.items():
            row = queries.get_machine(self.machines.store.db, machine_id)
            key = (row.config.metadata or {}).get(SLOT_KEY) if row is not None else None
            if row is None or key is None:
                continue  # a task's own machine: the watch's
            mine.sort(key=lambda r: r.seq)
            # A slot of an earlier version's loop (found after an upgrade) keeps the runs it
            # held, written again in its own form; under a shape no task has, it gets no
            # other, and goes once idle.
            loop = loop_of(row.config)
            slot = Slot(key=key if loop == LOOP else f"{key}:loop{loop}", app=row.app,
                        ask=Ask.for_config(row.config), machine_id=row.id,
                        directory=self.home_of(row.id, row.private_ip),
                        runs=[r.seq for r in mine], job=mine[0].job_id if mine else None,
                        idle_since=self.store.jobs.clock(), loop=loop)
            slot.ready.set()
            self.slots.append(slot)
            attached = False
            if row.state == S.STARTED and slot.directory is not None and \
                    (slot.directory / "ready").exists():
                try:
                    self._attach(slot)
                    attached = True
                except OSError as exc:  # its shell is gone: its end is on its way
                    log.info("slot %s cannot be reached: %s", row.id, exc)
            if attached:
                self.read_results(slot)
                for seq in list(slot.runs):
                    again = self.store.run(seq)
                    if again is not None:
                        self._write(slot, again, fresh=False)
                continue
            slot.tasks_fd = -1  # never attached: its end is read as a slot's that went
            if row.state in LIVE:  # not reachable: stopped, its ends read once it has gone
                slot.retiring = True
                self._spawn(self._stop(slot))
            else:
                self.on_machine(row.id)
        self.retire_idle(self.store.jobs.clock(), all_idle=True)

    # -- tasks of its own -----------------------------------------------------------------------
    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for slot in self.slots:
            self._detach(slot)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
