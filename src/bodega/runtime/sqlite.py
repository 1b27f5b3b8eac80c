"""Opening bodega's SQLite files: WAL, a busy timeout, and numbered migrations.

Every database (a worker's store, each daemon's registry view) is opened the
same way: autocommit mode (transactions are explicit ``BEGIN IMMEDIATE``),
WAL so readers never wait for the writer, and the migrations in order, each
applied together with ``PRAGMA user_version`` in one transaction so a crash
leaves the file at the previous version, never half way.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_database(path: Path | str, migrations: tuple[str, ...], *,
                  synchronous: str = "FULL") -> sqlite3.Connection:
    if isinstance(path, Path):
        path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    if str(path) != ":memory:":
        db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("PRAGMA busy_timeout = 5000")
    version = db.execute("PRAGMA user_version").fetchone()[0]
    for number, script in enumerate(migrations, start=1):
        if number > version:
            db.executescript(
                f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    return db
