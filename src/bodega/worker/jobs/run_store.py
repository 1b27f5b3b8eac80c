"""What a worker that runs bodega-pool tasks keeps: its queue of probes and the runs it took.

Both live in the jobs database (``schema.py``), so a worker killed at any
instant finds on restart the probes it held (in their order) and every task it
had taken: a run still ``starting`` is created again under the same
idempotency key (one machine, never two), a ``running`` one is watched again,
an ``ended`` one is reported to its home again until the home has heard.

A run is one attempt of a task, named by its ``seq``: a task retried here is
taken while its failed attempt's run may still be waiting for the home to hear
its end, and every step (its machine's end, the report, a stop) acts on its
own run, never on whichever attempt of the task is newest.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace

from bodega.model.capacity import Ask
from bodega.model.machine_config import MachineConfig
from bodega.worker.jobs.store import JobStore

PROBES_READ = 8  # probes read at a time by the runner's look at its queue


@dataclass(frozen=True)
class ProbeRow:
    seq: int
    job_id: str
    home: str
    app: str
    ask: Ask
    count: int
    takes: int
    arrived_at: float

    @property
    def ref(self) -> str:
        """The next take's reference: a take asked again after a crash finds its tasks."""
        return f"p{self.seq}.{self.takes}"


@dataclass(frozen=True)
class RunRow:
    job_id: str
    index: int
    attempt: int
    home: str
    app: str
    config: MachineConfig
    lease_seconds: float
    grace_seconds: float
    machine_id: str | None
    state: str  # starting | running | ended
    stop: str | None
    exit_code: int | None
    reason: str | None
    updated_at: float
    seq: int = 0  # which run: given when it is stored (0: a take's answer, not stored yet)

    @property
    def idempotency_key(self) -> str:
        """Its machine's create: once per run (a task given back and taken again is another
        run of the same attempt number, with a machine of its own)."""
        return f"job-{self.job_id}-{self.index}-{self.attempt}-r{self.seq}"


class RunStore:
    def __init__(self, jobs: JobStore) -> None:
        self.jobs = jobs
        # A run's config never changes once taken: read from its row once, or never (a
        # take gives it), and kept while the run is (each end and renewal reads its run).
        self._configs: dict[int, MachineConfig] = {}

    @property
    def db(self) -> sqlite3.Connection:
        return self.jobs.db

    # -- probes held here -------------------------------------------------------------------
    def add_probe(self, job_id: str, home: str, app: str, ask: Ask, count: int,
                  now: float) -> int:
        with self.jobs.tx(synced=False) as conn:
            return self._add_probe(conn, job_id, home, app, ask, count, now)

    def hold_probes(self, home: str, drops: list[str],
                    probes: list[tuple[str, str, Ask, int]], now: float) -> tuple[int, list[int]]:
        """A home's batch in one commit: its probes of the ``drops`` jobs gone, then each of
        ``probes`` (job, app, ask, count) added. How many drops found probes, and the probes
        held of each job after."""
        with self.jobs.tx(synced=False) as conn:
            dropped = sum(self.jobs.forget_held(conn, job_id, home) for job_id in drops)
            held = [self._add_probe(conn, job_id, home, app, ask, count, now)
                    for job_id, app, ask, count in probes]
        return dropped, held

    @staticmethod
    def _add_probe(conn: sqlite3.Connection, job_id: str, home: str, app: str, ask: Ask,
                   count: int, now: float) -> int:
        conn.execute(
            "INSERT INTO probes_in (job_id, home, app, ask, count, arrived_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO UPDATE SET "
            "count = count + excluded.count",
            (job_id, home, app, json.dumps(ask.to_wire()), count, now))
        (held,) = conn.execute("SELECT count FROM probes_in WHERE job_id = ?",
                               (job_id,)).fetchone()
        return int(held)

    def probes(self) -> Iterator[ProbeRow]:
        """The probes held here in arrival order, read a few at a time: the runner's look
        mostly stops at the first that finds no room, while a busy worker holds hundreds
        (each read anew on every look cost its loop milliseconds)."""
        after = -1
        while True:
            rows = self.db.execute("SELECT * FROM probes_in WHERE seq > ? ORDER BY seq LIMIT ?",
                                   (after, PROBES_READ)).fetchall()
            for r in rows:
                yield ProbeRow(seq=r["seq"], job_id=r["job_id"], home=r["home"], app=r["app"],
                               ask=Ask.from_wire(json.loads(r["ask"])), count=r["count"],
                               takes=r["takes"], arrived_at=r["arrived_at"])
            if len(rows) < PROBES_READ:
                return
            after = rows[-1]["seq"]

    def drop_probe(self, job_id: str) -> bool:
        with self.jobs.tx(synced=False) as conn:
            return conn.execute("DELETE FROM probes_in WHERE job_id = ?",
                                (job_id,)).rowcount > 0

    def took(self, probe: ProbeRow, runs: list[RunRow], drop: bool,
             now: float) -> list[RunRow]:
        """A take's answer, in one commit: the runs it gave, the probes it used. Returns the
        runs recorded; a task whose attempt already runs here (the same take answered again)
        is not recorded twice."""
        recorded: list[RunRow] = []
        with self.jobs.tx(synced=False) as conn:
            for r in runs:
                if conn.execute("SELECT 1 FROM runs WHERE job_id = ? AND idx = ? AND "
                                "attempt = ? AND state != 'ended'",
                                (r.job_id, r.index, r.attempt)).fetchone():
                    continue
                seq = _insert_run(conn, r, "starting", None, now)
                recorded.append(replace(r, seq=seq, state="starting", updated_at=now))
                self._configs[seq] = r.config
            left = probe.count - len(runs)
            if drop or left <= 0:
                conn.execute("DELETE FROM probes_in WHERE seq = ?", (probe.seq,))
            else:
                conn.execute("UPDATE probes_in SET count = ?, takes = takes + 1 WHERE seq = ?",
                             (left, probe.seq))
        return recorded

    def seated(self, conn: sqlite3.Connection, run: RunRow) -> RunRow:
        """A run already running in a slot (``run.machine_id``), recorded in the transaction
        of its job's submit (``bodega.jobs.seats``)."""
        seq = _insert_run(conn, run, "running", run.machine_id, run.updated_at)
        return replace(run, seq=seq, state="running")

    def remember(self, run: RunRow) -> None:
        """Keep a committed run's config, so its row is never read back for it."""
        self._configs[run.seq] = run.config

    # -- runs ---------------------------------------------------------------------------------
    def runs(self) -> list[RunRow]:
        return [self._run(r) for r in self.db.execute("SELECT * FROM runs ORDER BY seq")]

    def run(self, seq: int) -> RunRow | None:
        row = self.db.execute("SELECT * FROM runs WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else self._run(row)

    def latest(self, job_id: str, index: int, *, live: bool = False) -> RunRow | None:
        """The newest run of a task here (``live``: of those not ended yet)."""
        row = self.db.execute(
            "SELECT * FROM runs WHERE job_id = ? AND idx = ?"
            + (" AND state != 'ended'" if live else "") + " ORDER BY seq DESC LIMIT 1",
            (job_id, index)).fetchone()
        return None if row is None else self._run(row)

    def update(self, run: RunRow, now: float, **changes: object) -> None:
        columns = ", ".join(f"{name} = ?" for name in changes)
        with self.jobs.tx(synced=False) as conn:
            conn.execute(f"UPDATE runs SET {columns}, updated_at = ? WHERE seq = ?",
                         (*changes.values(), now, run.seq))

    def running(self, placed: list[tuple[RunRow, str]], now: float) -> None:
        """Runs now running in the machines given, in one commit."""
        with self.jobs.tx(synced=False) as conn:
            conn.executemany(
                "UPDATE runs SET machine_id = ?, state = 'running', updated_at = ? "
                "WHERE seq = ?", [(machine_id, now, run.seq) for run, machine_id in placed])

    def forget_all(self, runs: list[RunRow]) -> None:
        with self.jobs.tx(synced=False) as conn:
            conn.executemany("DELETE FROM runs WHERE seq = ?", [(run.seq,) for run in runs])
        for run in runs:
            self._configs.pop(run.seq, None)

    def _run(self, row: sqlite3.Row) -> RunRow:
        seq = row["seq"]
        config = self._configs.get(seq)
        if config is None:
            config = self._configs[seq] = MachineConfig.model_validate_json(row["config"])
        return _run(row, config)


def _run(row: sqlite3.Row, config: MachineConfig) -> RunRow:
    return RunRow(job_id=row["job_id"], index=row["idx"], attempt=row["attempt"],
                  home=row["home"], app=row["app"], config=config,
                  lease_seconds=row["lease_seconds"], grace_seconds=row["grace_seconds"],
                  machine_id=row["machine_id"], state=row["state"], stop=row["stop"],
                  exit_code=row["exit_code"], reason=row["reason"],
                  updated_at=row["updated_at"], seq=row["seq"])


def _insert_run(conn: sqlite3.Connection, run: RunRow, state: str, machine_id: str | None,
                at: float) -> int:
    """A new run's row, in ``state`` (its slot's machine, once it has one); its seq."""
    cursor = conn.execute(
        "INSERT INTO runs (job_id, idx, attempt, home, app, config, lease_seconds, "
        "grace_seconds, machine_id, state, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run.job_id, run.index, run.attempt, run.home, run.app,
         run.config.model_dump_json(exclude_none=True), run.lease_seconds,
         run.grace_seconds, machine_id, state, at, at))
    assert cursor.lastrowid is not None
    return cursor.lastrowid
