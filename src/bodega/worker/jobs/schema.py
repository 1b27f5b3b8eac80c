"""The jobs database of a worker (``jobs.db`` beside ``worker.db``), as numbered migrations.

A worker plays two parts in bodega's batch layer, and keeps both here:

- **home** of the jobs brokers committed to it: ``jobs`` (the spec, as JSON,
  never changed), ``tasks`` (one row per task: the state the pure rules of
  ``jobs/tasks.py`` move it through) and ``probes_out`` (the late-binding
  reservations it placed on workers, not yet answered);
- **runner** of bodega-pool tasks: ``probes_in`` (reservations other homes
  placed here, in arrival order) and ``runs`` (each attempt of a task it took
  and runs as a machine, until its end is reported to its home).

A file of its own, so that jobs never wait on a machine's transaction nor the
other way round; like ``worker.db`` it is WAL: a submit, claim or release is in
the WAL before it is answered (safe from any process's crash), and fsync'd within
``wiring.SYNC_EVERY`` (a cancel, or a submit with ``--jobs-sync-submits``, before).
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,               -- a ULID: ordered by submission
        app TEXT NOT NULL,
        name TEXT NOT NULL,
        pool TEXT NOT NULL,
        spec TEXT NOT NULL,                -- the JobSpec, as JSON
        idempotency_key TEXT,
        deadline_at REAL,
        state TEXT NOT NULL,               -- derived from its tasks, kept for queries
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE UNIQUE INDEX jobs_by_name ON jobs (app, name);
    CREATE UNIQUE INDEX jobs_by_key ON jobs (app, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
    CREATE INDEX jobs_deadline ON jobs (deadline_at)
        WHERE deadline_at IS NOT NULL AND finished_at IS NULL;

    CREATE TABLE tasks (
        job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        exit_codes TEXT NOT NULL,          -- JSON list, null for a lapsed lease
        claimant TEXT,
        ref TEXT,
        lease_expires_at REAL,
        eligible_at REAL NOT NULL,
        started_at REAL,
        ended_at REAL,
        machine_id TEXT,
        stopping TEXT,
        reason TEXT NOT NULL,
        PRIMARY KEY (job_id, idx)
    );
    CREATE INDEX tasks_queued ON tasks (job_id, eligible_at) WHERE state = 'queued';
    CREATE INDEX tasks_leases ON tasks (lease_expires_at) WHERE state = 'running';
    CREATE INDEX tasks_held ON tasks (claimant) WHERE state = 'running';

    CREATE TABLE probes_out (
        job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        worker TEXT NOT NULL,
        count INTEGER NOT NULL,            -- placed there and not answered yet
        delivered INTEGER NOT NULL,        -- of which the worker has acknowledged
        updated_at REAL NOT NULL,
        PRIMARY KEY (job_id, worker)
    );

    CREATE TABLE probes_in (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- arrival order: the queue
        job_id TEXT NOT NULL UNIQUE,
        home TEXT NOT NULL,
        app TEXT NOT NULL,
        ask TEXT NOT NULL,                 -- JSON: what one task needs
        count INTEGER NOT NULL,
        takes INTEGER NOT NULL DEFAULT 0,  -- takes answered: names the next take's ref
        arrived_at REAL NOT NULL
    );

    CREATE TABLE runs (
        job_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        home TEXT NOT NULL,
        app TEXT NOT NULL,
        config TEXT NOT NULL,              -- the machine config the task runs as
        lease_seconds REAL NOT NULL,
        grace_seconds REAL NOT NULL,
        machine_id TEXT,
        state TEXT NOT NULL CHECK (state IN ('starting', 'running', 'ended')),
        stop TEXT,                         -- why it is to be stopped (cancelled, lost, ...)
        exit_code INTEGER,                 -- ended: the code; NULL: given back
        reason TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (job_id, idx)
    );
    """,
    # A run per attempt, not per task: a task retried on the worker that ran its failed
    # attempt is taken while that attempt's row may still wait for its end to be heard, and
    # a task given back and taken again has the same attempt number. ``seq`` names one run.
    """
    CREATE TABLE runs_by_attempt (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        home TEXT NOT NULL,
        app TEXT NOT NULL,
        config TEXT NOT NULL,
        lease_seconds REAL NOT NULL,
        grace_seconds REAL NOT NULL,
        machine_id TEXT,
        state TEXT NOT NULL CHECK (state IN ('starting', 'running', 'ended')),
        stop TEXT,
        exit_code INTEGER,
        reason TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    INSERT INTO runs_by_attempt (job_id, idx, attempt, home, app, config, lease_seconds,
        grace_seconds, machine_id, state, stop, exit_code, reason, created_at, updated_at)
        SELECT job_id, idx, attempt, home, app, config, lease_seconds, grace_seconds,
               machine_id, state, stop, exit_code, reason, created_at, updated_at
        FROM runs ORDER BY created_at;
    DROP TABLE runs;
    ALTER TABLE runs_by_attempt RENAME TO runs;
    CREATE INDEX runs_by_task ON runs (job_id, idx, attempt);
    """,
    # Jobs that wait for others (``after``): the ones still waited for, NULL once free.
    # Periodic jobs: when each fires next and what its runs did (a run's spec names its job).
    """
    ALTER TABLE jobs ADD COLUMN waiting TEXT;
    CREATE INDEX jobs_waiting ON jobs (id) WHERE waiting IS NOT NULL;

    CREATE TABLE periodic (
        job_id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
        next_at REAL NOT NULL,             -- the next fire, by the scheduler's clock
        launched INTEGER NOT NULL DEFAULT 0,
        skipped INTEGER NOT NULL DEFAULT 0,
        pending TEXT NOT NULL DEFAULT '[]',  -- fires queued behind an unfinished run (JSON)
        last_run TEXT                      -- the id of the latest run
    );
    """,
    # A job's counts by state, read at each of its tasks' changes: from this index alone,
    # not every task's row (a job of 10,000 tasks read whole at each end was most of a home).
    """
    CREATE INDEX tasks_states ON tasks (job_id, state);
    """,
    # ... but that index is still walked whole, one entry per task, at each change: with
    # 10,000 tasks, an eighth of a busy home. The counts are kept by the database itself,
    # in the transaction that moves a task, so they are never off by a crash.
    # (Migrations run in one transaction each: a crash half way leaves none of it.)
    """
    CREATE TABLE task_counts (
        job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        state TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (job_id, state)
    ) WITHOUT ROWID;
    INSERT INTO task_counts (job_id, state, n)
        SELECT job_id, state, count(*) FROM tasks GROUP BY job_id, state;

    CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
        INSERT INTO task_counts (job_id, state, n) VALUES (NEW.job_id, NEW.state, 1)
            ON CONFLICT (job_id, state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER task_counts_update AFTER UPDATE OF state ON tasks
        WHEN OLD.state IS NOT NEW.state BEGIN
        UPDATE task_counts SET n = n - 1 WHERE job_id = OLD.job_id AND state = OLD.state;
        INSERT INTO task_counts (job_id, state, n) VALUES (NEW.job_id, NEW.state, 1)
            ON CONFLICT (job_id, state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
        UPDATE task_counts SET n = n - 1 WHERE job_id = OLD.job_id AND state = OLD.state;
    END;

    -- A job's queued and running tasks in task order, each state an index of its own: a
    -- claim's first few, a worker's held ones, read without walking the job's other tasks
    -- (on the primary key, SQLite read all 10,000 rows of a job for its few running ones).
    -- Tasks waiting out a backoff, by when they may run: what the queued count leaves out.
    -- No query reads a job's tasks by state any more, nor a worker's by claimant alone: those
    -- two indexes only cost each task's write, and go.
    DROP INDEX tasks_states;
    DROP INDEX tasks_held;
    DROP INDEX tasks_queued;
    CREATE INDEX tasks_queued ON tasks (job_id, idx) WHERE state = 'queued';
    CREATE INDEX tasks_running ON tasks (job_id, idx) WHERE state = 'running';
    CREATE INDEX tasks_backoff ON tasks (eligible_at) WHERE state = 'queued';
    """,
    # What a home reads at every submit and every end must not grow with the finished jobs
    # it keeps (up to a thousand an app): a count that falls to zero goes, so the queued
    # counts are only those of jobs with queued tasks, found by state; unfinished jobs are
    # found without walking the finished ones.
    """
    DROP TRIGGER task_counts_update;
    DROP TRIGGER task_counts_delete;
    CREATE TRIGGER task_counts_update AFTER UPDATE OF state ON tasks
        WHEN OLD.state IS NOT NEW.state BEGIN
        UPDATE task_counts SET n = n - 1 WHERE job_id = OLD.job_id AND state = OLD.state;
        DELETE FROM task_counts WHERE job_id = OLD.job_id AND state = OLD.state AND n <= 0;
        INSERT INTO task_counts (job_id, state, n) VALUES (NEW.job_id, NEW.state, 1)
            ON CONFLICT (job_id, state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
        UPDATE task_counts SET n = n - 1 WHERE job_id = OLD.job_id AND state = OLD.state;
        DELETE FROM task_counts WHERE job_id = OLD.job_id AND state = OLD.state AND n <= 0;
    END;
    DELETE FROM task_counts WHERE n <= 0;
    CREATE INDEX task_counts_by_state ON task_counts (state);
    CREATE INDEX jobs_unfinished ON jobs (state) WHERE finished_at IS NULL;
    """,
)
