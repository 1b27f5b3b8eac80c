"""The jobs database: its transactions, and what a job's home reads and writes in it.

Every change a home makes is one ``tx()`` (``BEGIN IMMEDIATE`` ... ``COMMIT``)
with no ``await`` inside, so of two claims of one task only the first
to commit finds it queued: exactly one winner, with no lock beyond SQLite's.
Rows are read into the pure ``Task`` and ``JobSpec`` (``jobs/``) here, and
only here. The runner's tables are read in ``run_store.py``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bodega.jobs.jobs import JobState
from bodega.jobs.spec import JobSpec
from bodega.jobs.tasks import Policy, Task, TaskState
from bodega.runtime.sqlite import open_database
from bodega.runtime.steady_clock import SteadyClock
from bodega.worker.jobs.schema import MIGRATIONS
from bodega.worker.store.database import storage_error

SPECS_HELD = 4096  # parsed specs kept: the jobs a busy home reads again and again


@dataclass(frozen=True)
class JobRow:
    id: str
    spec: JobSpec
    state: JobState
    created_at: float
    updated_at: float
    finished_at: float | None
    waiting: tuple[str, ...] | None = None  # the jobs it still waits for (None: free)

    @property
    def app(self) -> str:
        return self.spec.app

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def policy(self) -> Policy:
        s = self.spec
        return Policy(s.max_attempts, s.backoff, s.backoff_cap, s.lease_seconds, s.deadline_at)


@dataclass(frozen=True)
class PeriodicRow:
    """Where a periodic job's schedule stands (``jobs/periodic.py`` decides from it)."""

    job_id: str
    next_at: float
    launched: int = 0
    skipped: int = 0
    pending: tuple[float, ...] = ()  # fires queued behind an unfinished run
    last_run: str | None = None


class JobStore:
    def __init__(self, path: Path, clock: Callable[[], float] | None = None) -> None:
        """``clock``: what leases, backoffs and deadlines are stamped with and measured
        against; by default one that never runs backwards from the newest time this file
        recorded (``SteadyClock``), so a host's clock stepped back neither holds an ended
        lease again nor lets a lapsed one be renewed."""
        self.path = path
        self.db = open_database(path, MIGRATIONS, synchronous="NORMAL")
        self.db.row_factory = sqlite3.Row
        self.clock = clock or SteadyClock(floor=self.newest_stamp())
        self.unsynced = False  # a commit not fsync'd since the last ``sync``
        # Jobs' specs as read or inserted, by id: a spec is never changed once committed (a
        # job's id is never used again), and parsing one is most of what reading a job costs.
        self._specs: dict[str, JobSpec] = {}

    def newest_stamp(self) -> float:
        """The latest time this file recorded (0 when empty): a job's or a run's last
        change, a reservation's arrival or placing."""
        (stamped,) = self.db.execute(
            "SELECT max(coalesce((SELECT max(updated_at) FROM jobs), 0), "
            "coalesce((SELECT max(updated_at) FROM runs), 0), "
            "coalesce((SELECT max(updated_at) FROM probes_out), 0), "
            "coalesce((SELECT max(arrived_at) FROM probes_in), 0))").fetchone()
        return float(stamped)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def tx(self, *, synced: bool = True) -> Iterator[sqlite3.Connection]:
        """One atomic, durable unit (a full disk becomes ``StorageFull``, nothing kept).

        ``synced=False``: committed to the WAL but not fsync'd (submits, and a task's steps:
        claims, takes, renewals, ends, a runner's records): a process killed at any instant
        loses none of it (the WAL is in the file, the page cache writes it); only the host
        losing power can lose what came after the last ``sync`` (the worker runs one every
        ``SYNC_EVERY``), synced commit or checkpoint. Cancels are synced: the WAL is fsync'd
        once committed, as ``synchronous = FULL`` would (the file is opened ``NORMAL``, so
        an unsynced commit costs no pragma either side)."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
            yield self.db
            self.db.execute("COMMIT")
        except BaseException as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            full = storage_error(exc)
            if full is exc:
                raise
            raise full from exc
        if synced:
            self.sync()
            self.unsynced = False  # the fsync took every commit before it too
        else:
            self.unsynced = True

    def sync(self) -> None:
        """fsync the WAL: every commit made before it is then durable against the host losing
        power too. Called off the event loop (a thread) by the worker's sync round, and
        inline after a synced commit, as ``synchronous = FULL`` would."""
        try:
            fd = os.open(self.path.with_name(self.path.name + "-wal"), os.O_RDONLY)
        except FileNotFoundError:  # nothing written since the last checkpoint took it
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- jobs -------------------------------------------------------------------------------
    def insert_job(self, conn: sqlite3.Connection, job_id: str, spec: JobSpec,
                   now: float) -> None:
        """The job and its queued tasks; a periodic job has none (its runs have), a job that
        runs after others waits for them."""
        state = JobState.SCHEDULED if spec.periodic else \
            JobState.WAITING if spec.after else JobState.QUEUED
        conn.execute(
            "INSERT INTO jobs (id, app, name, pool, spec, idempotency_key, deadline_at, state, "
            "created_at, updated_at, waiting) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (job_id, spec.app, spec.name, spec.pool, spec.model_dump_json(exclude_none=True),
             spec.idempotency_key, spec.deadline_at, str(state), now, now,
             json.dumps(list(spec.after)) if spec.after else None))
        self._held(job_id, spec)
        if spec.periodic:
            return
        conn.executemany(
            "INSERT INTO tasks (job_id, idx, state, attempts, exit_codes, eligible_at, reason) "
            "VALUES (?, ?, 'queued', 0, '[]', ?, '')",
            ((job_id, i, now) for i in range(spec.count)))

    def job(self, job_id: str) -> JobRow | None:
        row = self.db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else self._job(row)

    def job_named(self, app: str, name: str) -> JobRow | None:
        row = self.db.execute("SELECT * FROM jobs WHERE app = ? AND name = ?",
                              (app, name)).fetchone()
        return None if row is None else self._job(row)

    def job_keyed(self, app: str, key: str) -> JobRow | None:
        row = self.db.execute("SELECT * FROM jobs WHERE app = ? AND idempotency_key = ?",
                              (app, key)).fetchone()
        return None if row is None else self._job(row)

    def jobs(self, app: str | None = None) -> list[JobRow]:
        rows = self.db.execute("SELECT * FROM jobs ORDER BY id") if app is None else \
            self.db.execute("SELECT * FROM jobs WHERE app = ? ORDER BY id", (app,))
        return [self._job(row) for row in rows]

    def _job(self, row: sqlite3.Row) -> JobRow:
        job_id = row["id"]
        spec = self._specs.get(job_id)
        if spec is None:
            spec = self._held(job_id, JobSpec.model_validate_json(row["spec"]))
        return JobRow(id=job_id, spec=spec, state=JobState(row["state"]),
                      created_at=row["created_at"], updated_at=row["updated_at"],
                      finished_at=row["finished_at"], waiting=None if row["waiting"] is None
                      else tuple(json.loads(row["waiting"])))

    def _held(self, job_id: str, spec: JobSpec) -> JobSpec:
        if len(self._specs) >= SPECS_HELD:
            del self._specs[next(iter(self._specs))]  # the first held (a read does not renew)
        self._specs[job_id] = spec
        return spec

    def set_job_state(self, conn: sqlite3.Connection, job_id: str, state: JobState,
                      now: float, finished: bool) -> None:
        conn.execute("UPDATE jobs SET state = ?, updated_at = ?, finished_at = ? WHERE id = ?",
                     (str(state), now, now if finished else None, job_id))

    def set_waiting(self, conn: sqlite3.Connection, job_id: str,
                    waiting: tuple[str, ...] | None) -> None:
        conn.execute("UPDATE jobs SET waiting = ? WHERE id = ?",
                     (None if waiting is None else json.dumps(list(waiting)), job_id))

    def waiting_jobs(self) -> list[JobRow]:
        return [self._job(row) for row in self.db.execute(
            "SELECT * FROM jobs WHERE waiting IS NOT NULL AND finished_at IS NULL ORDER BY id")]

    def state_named(self, app: str, name: str) -> str | None:
        row = self.db.execute("SELECT state FROM jobs WHERE app = ? AND name = ?",
                              (app, name)).fetchone()
        return None if row is None else str(row[0])

    # -- periodic jobs ------------------------------------------------------------------------
    def insert_periodic(self, conn: sqlite3.Connection, row: PeriodicRow) -> None:
        conn.execute("INSERT INTO periodic (job_id, next_at) VALUES (?, ?)",
                     (row.job_id, row.next_at))

    def put_periodic(self, conn: sqlite3.Connection, row: PeriodicRow) -> None:
        conn.execute("UPDATE periodic SET next_at = ?, launched = ?, "
                     "skipped = ?, pending = ?, last_run = ? WHERE job_id = ?",
                     (row.next_at, row.launched, row.skipped,
                      json.dumps(list(row.pending)),
                      row.last_run, row.job_id))

    def periodic(self, job_id: str) -> PeriodicRow | None:
        row = self.db.execute("SELECT * FROM periodic WHERE job_id = ?", (job_id,)).fetchone()
        return None if row is None else _periodic(row)

    def schedules(self) -> list[PeriodicRow]:
        """The schedules of periodic jobs not cancelled."""
        return [_periodic(r) for r in self.db.execute(
            "SELECT p.* FROM periodic p JOIN jobs j ON j.id = p.job_id "
            "WHERE j.finished_at IS NULL ORDER BY p.job_id")]

    def delete_job(self, conn: sqlite3.Connection, job_id: str) -> None:
        conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        self._specs.pop(job_id, None)

    def finished(self) -> list[tuple[str, str, float]]:
        return [(r[0], r[1], float(r[2])) for r in self.db.execute(
            "SELECT id, app, finished_at FROM jobs WHERE finished_at IS NOT NULL")]

    def any_unfinished(self) -> bool:
        """A job under way: tasks to lease, probe, stop (a periodic job has none itself)."""
        return self.db.execute(
            "SELECT 1 FROM jobs WHERE finished_at IS NULL AND state != ? LIMIT 1",
            (str(JobState.SCHEDULED),)).fetchone() is not None

    def any_scheduled(self) -> bool:
        return self.db.execute(
            "SELECT 1 FROM jobs WHERE finished_at IS NULL AND state = ? LIMIT 1",
            (str(JobState.SCHEDULED),)).fetchone() is not None

    def past_deadline(self, now: float) -> list[str]:
        return [str(r[0]) for r in self.db.execute(
            "SELECT id FROM jobs WHERE deadline_at IS NOT NULL AND finished_at IS NULL "
            "AND deadline_at <= ?", (now,))]

    # -- tasks ------------------------------------------------------------------------------
    def tasks(self, conn: sqlite3.Connection, job_id: str) -> list[Task]:
        return [_task(r) for r in conn.execute(
            "SELECT * FROM tasks WHERE job_id = ? ORDER BY idx", (job_id,))]

    def task(self, conn: sqlite3.Connection, job_id: str, index: int) -> Task | None:
        row = conn.execute("SELECT * FROM tasks WHERE job_id = ? AND idx = ?",
                           (job_id, index)).fetchone()
        return None if row is None else _task(row)

    def claimable(self, conn: sqlite3.Connection, job_id: str, now: float,
                  limit: int) -> list[Task]:
        return [_task(r) for r in conn.execute(
            "SELECT * FROM tasks WHERE job_id = ? AND state = 'queued' AND eligible_at <= ? "
            "ORDER BY idx LIMIT ?", (job_id, now, limit))]

    def held(self, conn: sqlite3.Connection, job_id: str, worker: str,
             ref: str | None = None) -> list[Task]:
        """Running tasks of the job that ``worker`` holds (under claim ``ref``, if given)."""
        sql = "SELECT * FROM tasks WHERE job_id = ? AND state = 'running' AND claimant = ?"
        args: tuple[str, ...] = (job_id, worker)
        if ref is not None:
            sql, args = sql + " AND ref = ?", (*args, ref)
        return [_task(r) for r in conn.execute(sql + " ORDER BY idx", args)]

    def running(self, conn: sqlite3.Connection, job_id: str) -> list[Task]:
        return [_task(r) for r in conn.execute(
            "SELECT * FROM tasks WHERE job_id = ? AND state = 'running' ORDER BY idx",
            (job_id,))]

    def put_task(self, conn: sqlite3.Connection, job_id: str, task: Task) -> None:
        conn.execute(
            "UPDATE tasks SET state = ?, attempts = ?, exit_codes = ?, claimant = ?, ref = ?, "
            "lease_expires_at = ?, eligible_at = ?, started_at = ?, ended_at = ?, "
            "machine_id = ?, stopping = ?, reason = ? WHERE job_id = ? AND idx = ?",
            (str(task.state), task.attempts, json.dumps(list(task.exit_codes)), task.claimant,
             task.ref, task.lease_expires_at, task.eligible_at, task.started_at, task.ended_at,
             task.machine_id, task.stopping, task.reason, job_id, task.index))

    def counts(self, conn: sqlite3.Connection, job_id: str) -> dict[str, int]:
        found = dict.fromkeys((str(s) for s in TaskState), 0)
        for state, n in conn.execute(  # kept by triggers (schema.py)
                "SELECT state, n FROM task_counts WHERE job_id = ?", (job_id,)):
            found[str(state)] = int(n)
        return found

    def queued_total(self) -> int:
        (n,) = self.db.execute(
            "SELECT coalesce(sum(n), 0) FROM task_counts WHERE state = 'queued'").fetchone()
        return int(n)

    def lapsed(self, now: float) -> list[tuple[str, int]]:
        return [(str(r[0]), int(r[1])) for r in self.db.execute(
            "SELECT job_id, idx FROM tasks WHERE state = 'running' AND lease_expires_at < ?",
            (now,))]

    def claimable_by_job(self, now: float, pool: str) -> dict[str, int]:
        """Jobs of ``pool`` with tasks that may run now, and how many: their queued tasks'
        count, less those waiting out a backoff (few, read by when they may run)."""
        queued = {str(r[0]): int(r[1]) for r in self.db.execute(
            "SELECT c.job_id, c.n FROM task_counts c JOIN jobs j ON j.id = c.job_id "
            "WHERE c.state = 'queued' AND c.n > 0 AND j.pool = ? AND j.waiting IS NULL",
            (pool,))}
        if queued:
            for job_id, n in self.db.execute(
                    "SELECT job_id, count(*) FROM tasks INDEXED BY tasks_backoff "
                    "WHERE state = 'queued' AND eligible_at > ? GROUP BY job_id", (now,)):
                if job_id in queued:
                    queued[job_id] -= int(n)
        return {job_id: n for job_id, n in queued.items() if n > 0}

    # -- probes placed by this home -----------------------------------------------------------
    def add_probes(self, conn: sqlite3.Connection, job_id: str, placed: dict[str, int],
                   now: float) -> None:
        conn.executemany(
            "INSERT INTO probes_out (job_id, worker, count, delivered, updated_at) "
            "VALUES (?, ?, ?, 0, ?) ON CONFLICT (job_id, worker) DO UPDATE SET "
            "count = count + excluded.count, updated_at = excluded.updated_at",
            ((job_id, worker, n, now) for worker, n in placed.items() if n > 0))

    def probes_answered(self, conn: sqlite3.Connection, job_id: str, worker: str, used: int,
                        drop: bool) -> None:
        if drop:
            conn.execute("DELETE FROM probes_out WHERE job_id = ? AND worker = ?",
                         (job_id, worker))
        else:
            conn.execute("UPDATE probes_out SET count = max(0, count - ?), "
                         "delivered = max(0, delivered - ?) WHERE job_id = ? AND worker = ?",
                         (used, used, job_id, worker))

    def probes_out(self, job_id: str) -> list[tuple[str, str, int, int]]:
        """(job, worker, count, delivered) of the job's probes out there."""
        return _probes(self.db.execute(
            f"{PROBES_OUT} WHERE job_id = ?", (job_id,)))

    def undelivered_probes(self) -> list[tuple[str, str, int, int]]:
        """The probes out there not all delivered yet, of every job (a finished job's rows
        stay until the job goes, so a look at all of them would grow with every job)."""
        return _probes(self.db.execute(f"{PROBES_OUT} WHERE count > delivered"))

    def probes_delivered(self, worker: str, sent: list[tuple[str, int]]) -> None:
        """``sent``: (job, probes) delivered to ``worker``. Not synced: a record lost with the
        host's power has its probes delivered again, and a worker holding more of a job's
        probes than it has tasks is answered ``drop``."""
        with self.tx(synced=False) as conn:
            conn.executemany("UPDATE probes_out SET delivered = min(count, delivered + ?) "
                             "WHERE job_id = ? AND worker = ?",
                             [(count, job_id, worker) for job_id, count in sent])

    def forget_probes(self, conn: sqlite3.Connection, job_id: str,
                      worker: str | None = None) -> None:
        if worker is None:
            conn.execute("DELETE FROM probes_out WHERE job_id = ?", (job_id,))
        else:
            conn.execute("DELETE FROM probes_out WHERE job_id = ? AND worker = ?",
                         (job_id, worker))

    def forget_held(self, conn: sqlite3.Connection, job_id: str, home: str) -> int:
        """This worker's runner's probes (``probes_in``) of ``home``'s job ``job_id``; how
        many rows went."""
        return conn.execute("DELETE FROM probes_in WHERE job_id = ? AND home = ?",
                            (job_id, home)).rowcount


PROBES_OUT = "SELECT job_id, worker, count, delivered FROM probes_out"


def _probes(rows: Iterable[sqlite3.Row]) -> list[tuple[str, str, int, int]]:
    return [(str(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]


def _periodic(row: sqlite3.Row) -> PeriodicRow:
    return PeriodicRow(job_id=row["job_id"], next_at=row["next_at"], launched=row["launched"],
                       skipped=row["skipped"], pending=tuple(json.loads(row["pending"])),
                       last_run=row["last_run"])


def _task(row: sqlite3.Row) -> Task:
    return Task(index=row["idx"], state=TaskState(row["state"]), attempts=row["attempts"],
                exit_codes=tuple(json.loads(row["exit_codes"])), claimant=row["claimant"],
                ref=row["ref"], lease_expires_at=row["lease_expires_at"],
                eligible_at=row["eligible_at"], started_at=row["started_at"],
                ended_at=row["ended_at"], machine_id=row["machine_id"],
                stopping=row["stopping"], reason=row["reason"])
