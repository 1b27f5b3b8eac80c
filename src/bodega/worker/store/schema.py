"""The worker's SQLite schema, as numbered migrations applied in order.

``ops`` is the append-only history: one row per step an operation enters,
written before that step's side effect, plus one row per machine event that
happens outside an operation (an unexpected exit). Every other table is a
materialization of that history, kept in the same transactions.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    # 1: the log, operations, machines, versions, reservations, volumes, leases.
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

    CREATE TABLE ops (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        op_id TEXT NOT NULL,
        resource_id TEXT NOT NULL,
        fsm TEXT NOT NULL,
        step TEXT NOT NULL,
        payload TEXT NOT NULL,
        event TEXT,
        at REAL NOT NULL
    );
    CREATE INDEX ops_by_resource ON ops (resource_id, seq);

    CREATE TABLE operations (
        op_id TEXT PRIMARY KEY,
        resource_id TEXT NOT NULL,
        fsm TEXT NOT NULL,
        step TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
        payload TEXT NOT NULL,
        error TEXT,
        started_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX operations_running ON operations (status) WHERE status = 'running';

    CREATE TABLE machines (
        id TEXT PRIMARY KEY,
        app TEXT NOT NULL,
        name TEXT NOT NULL,
        region TEXT NOT NULL,
        state TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        config TEXT NOT NULL,
        millicpus INTEGER NOT NULL,
        memory_mb INTEGER NOT NULL,
        gpus INTEGER NOT NULL DEFAULT 0,
        gpu_kind TEXT,
        ip_index INTEGER,
        private_ip TEXT,
        netns TEXT,
        cordoned INTEGER NOT NULL DEFAULT 0,
        holds_compute INTEGER NOT NULL DEFAULT 0,
        handle TEXT,
        start_seq INTEGER NOT NULL DEFAULT 0,
        restarts INTEGER NOT NULL DEFAULT 0,
        volume_id TEXT,
        placement TEXT,
        idempotency_key TEXT,
        last_exit TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE UNIQUE INDEX machines_live_name ON machines (app, name) WHERE state != 'destroyed';
    CREATE UNIQUE INDEX machines_live_ip ON machines (ip_index)
        WHERE state != 'destroyed' AND ip_index IS NOT NULL;
    CREATE INDEX machines_by_app ON machines (app);
    CREATE UNIQUE INDEX machines_idempotency ON machines (app, idempotency_key)
        WHERE idempotency_key IS NOT NULL;

    CREATE TABLE versions (
        machine_id TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        config TEXT NOT NULL,
        state TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (machine_id, instance_id)
    );

    CREATE TABLE reservations (
        id TEXT PRIMARY KEY,
        app TEXT NOT NULL,
        ask TEXT NOT NULL,
        millicpus INTEGER NOT NULL,
        memory_mb INTEGER NOT NULL,
        disk_gb INTEGER NOT NULL,
        gpus INTEGER NOT NULL,
        gpu_kind TEXT,
        expires_at REAL NOT NULL,
        claimed_by TEXT,
        created_at REAL NOT NULL
    );
    CREATE INDEX reservations_live ON reservations (expires_at) WHERE claimed_by IS NULL;

    CREATE TABLE volumes (
        id TEXT PRIMARY KEY,
        app TEXT NOT NULL,
        name TEXT NOT NULL,
        region TEXT NOT NULL,
        size_gb INTEGER NOT NULL,
        state TEXT NOT NULL,
        attached_machine_id TEXT,
        encrypted INTEGER NOT NULL DEFAULT 1,
        fstype TEXT NOT NULL DEFAULT 'ext4',
        snapshot_retention INTEGER NOT NULL DEFAULT 5,
        auto_backup_enabled INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX volumes_by_app ON volumes (app);

    CREATE TABLE leases (
        machine_id TEXT PRIMARY KEY,
        nonce TEXT NOT NULL,
        owner TEXT NOT NULL,
        description TEXT NOT NULL,
        expires_at REAL NOT NULL,
        version TEXT NOT NULL
    );
    """,
    # 2: the current run's health-check states (JSON), on the machine they belong to.
    """
    ALTER TABLE machines ADD COLUMN checks TEXT;
    """,
    # 3: a memory limit set below the reservation (PUT .../memory); NULL: the reservation.
    """
    ALTER TABLE machines ADD COLUMN memory_limit_mb INTEGER;
    """,
    # 4: volume snapshots: a copy of a volume's data on this host, kept for retention_days.
    """
    CREATE TABLE snapshots (
        id TEXT PRIMARY KEY,
        volume_id TEXT NOT NULL,
        app TEXT NOT NULL,
        status TEXT NOT NULL,
        size INTEGER NOT NULL DEFAULT 0,
        digest TEXT NOT NULL DEFAULT '',
        volume_size_gb INTEGER NOT NULL,
        retention_days INTEGER NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    );
    CREATE INDEX snapshots_by_volume ON snapshots (volume_id, created_at);
    """,
    # 5: the machine was started when its host's bodega stopped it: it starts again when
    # the worker comes back (``core/policy.py``, ``comes_back``).
    """
    ALTER TABLE machines ADD COLUMN host_stopped INTEGER NOT NULL DEFAULT 0;
    """,
    # 6: snapshots off their host: ``origin`` is the worker a copy came from (empty on
    # the one that took it), ``copies`` the workers holding one (comma separated, on the
    # origin's row), ``copy_tries`` how often sending one has failed.
    """
    ALTER TABLE snapshots ADD COLUMN origin TEXT NOT NULL DEFAULT '';
    ALTER TABLE snapshots ADD COLUMN copies TEXT NOT NULL DEFAULT '';
    ALTER TABLE snapshots ADD COLUMN copy_tries INTEGER NOT NULL DEFAULT 0;
    """,
    # 7: moves. A machine's and a volume's generation (one more at each move: its registry
    # row of the newest generation wins), and the machines (and volumes) that moved away
    # from this worker (their records are gone; where they went is kept, so that this
    # worker never deletes the registry row their new worker writes, and a stale import
    # of one is refused).
    """
    ALTER TABLE machines ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE volumes ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE moved_away (
        machine_id TEXT PRIMARY KEY,
        worker TEXT NOT NULL,
        generation INTEGER NOT NULL,
        at REAL NOT NULL
    );
    """,
)
