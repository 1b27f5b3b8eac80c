"""The public tables: every replicated table but those holding token hashes or keys, each
with its key, its indexed columns and doc."""

from __future__ import annotations

import sqlite3

from bodega.registry.api.core.catalog import DOC, HIDDEN, PUBLIC, live_view, views
from bodega.registry.replication.core.schema import MIGRATIONS, TABLES


def test_secrets_bearing_tables_are_hidden_and_every_other_shown() -> None:
    assert set(HIDDEN) == {"tokens", "keyrings", "secrets", "secretkeys", "certificates",
                           "join_tokens", "join_uses"}
    assert set(PUBLIC) | set(HIDDEN) == set(TABLES)
    assert not set(PUBLIC) & set(HIDDEN)
    assert PUBLIC["machines"].columns == ("id", "app", "name", "region", "worker", "state", DOC)
    for table in PUBLIC.values():
        assert DOC not in (table.key, *table.indexed)  # no column hides the document
        assert not any(c.startswith("_") for c in table.columns)


def test_the_views_show_live_rows_under_the_tables_names() -> None:
    db = sqlite3.connect(":memory:")
    for script in MIGRATIONS:
        db.executescript(script)
    db.execute("INSERT INTO machines (id, _doc, _owner, _version, _hlc_wall, _hlc_logical, "
               "_deleted, _updated_at, state) VALUES ('m1', '{}', 'w', 1, 1, 0, 0, 0, 'started'),"
               " ('m2', NULL, 'w', 2, 1, 0, 1, 0, NULL)")
    for made in views("abc"):
        db.execute(made)
    assert db.execute("SELECT id, state, doc FROM machines").fetchall() == [
        ("m1", "started", "{}")]
    assert db.execute(f"SELECT count(*) FROM {live_view('machines', 'abc')}").fetchone() == (1,)
    columns = [row[1] for row in db.execute("PRAGMA temp.table_info(machines)")]
    assert columns == list(PUBLIC["machines"].columns)
