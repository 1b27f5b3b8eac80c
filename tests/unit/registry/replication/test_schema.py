"""The view's schema: migrations carry every declared column, and only ever add."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from bodega.registry.replication.core.schema import MIGRATIONS, TABLES
from bodega.registry.replication.view import View

BOOKKEEPING = {"_doc", "_owner", "_version", "_hlc_wall", "_hlc_logical", "_deleted",
               "_updated_at"}


def columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def indexed(db: sqlite3.Connection, table: str) -> set[str]:
    names = set()
    for index in db.execute(f"PRAGMA index_list({table})"):
        names |= {row[2] for row in db.execute(f"PRAGMA index_info({index[1]})")}
    return names


def test_the_migrated_schema_has_every_declared_column_indexed() -> None:
    view = View(":memory:")
    for name, spec in TABLES.items():
        have = columns(view.db, name)
        assert {spec.key, *spec.column_names, *BOOKKEEPING} <= have, name
        assert set(spec.column_names) <= indexed(view.db, name), name
        assert not any(c.startswith("_") for c in spec.column_names)
    view.close()


def test_migrations_only_add() -> None:
    for script in MIGRATIONS:
        assert not re.search(r"\b(DROP|RENAME)\b", script, re.IGNORECASE)


def test_reopening_an_existing_view_keeps_its_rows(tmp_path: Path) -> None:
    view = View(tmp_path / "r.db")
    assert view.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    view.save_clock(5, 1)
    view.close()
    again = View(tmp_path / "r.db")
    assert again.clock() == (5, 1)
    assert again.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    again.close()
