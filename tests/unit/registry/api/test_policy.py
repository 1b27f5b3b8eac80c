"""The read policy: the public views and nothing else, judged as SQLite asks (an in-memory
replica schema with the catalog's views, the policy as its authorizer)."""

from __future__ import annotations

import sqlite3

import pytest

from bodega.registry.api.core.catalog import PUBLIC, live_view, views
from bodega.registry.api.core.policy import Action, ReadPolicy, Verdict
from bodega.registry.replication.core.schema import MIGRATIONS

NONCE = "0123456789abcdef"


def test_the_action_codes_are_sqlite_s() -> None:
    for action in Action:
        assert getattr(sqlite3, f"SQLITE_{action.name}") == action.value, action
    assert (Verdict.OK, Verdict.DENY) == (sqlite3.SQLITE_OK, sqlite3.SQLITE_DENY)


def prepared(sql: str) -> ReadPolicy:
    """The policy after SQLite prepared (and ran) ``sql``; it raises what SQLite raised."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    for script in MIGRATIONS:
        db.executescript(script)
    for made in views(NONCE):
        db.execute(made)
    policy = ReadPolicy(NONCE)
    db.set_authorizer(policy.decide)
    try:
        db.execute(sql).fetchall()
    except sqlite3.DatabaseError:
        assert policy.refusal is not None, sql
        raise
    finally:
        db.close()
    return policy


@pytest.mark.parametrize(("sql", "tables"), [
    ("SELECT id, state FROM machines WHERE app = 'web'", {"machines"}),
    ("SELECT m.id, w.region FROM machines m JOIN workers w ON w.name = m.worker",
     {"machines", "workers"}),
    ("SELECT app, count(*) FROM machines GROUP BY app", {"machines"}),
    ("WITH started AS (SELECT id FROM machines WHERE state = 'started') "
     "SELECT count(*) FROM started", {"machines"}),
    ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3) "
     "SELECT x FROM c", set()),
    ("SELECT m.id, j.key FROM machines m, json_each(m.doc) j", {"machines"}),
    ("SELECT json_extract(doc, '$.config.image') FROM temp.machines", {"machines"}),
    ("PRAGMA table_info(volumes)", set()),
])
def test_reads_of_the_public_views_pass_and_name_their_tables(sql: str,
                                                              tables: set[str]) -> None:
    policy = prepared(sql)
    assert policy.refusal is None
    assert policy.tables == tables


@pytest.mark.parametrize(("sql", "kind", "what"), [
    ("SELECT * FROM tokens", "table", "tokens"),
    ("SELECT * FROM keyrings", "table", "keyrings"),
    ("SELECT * FROM main.machines", "table", "main.machines"),
    ("SELECT _owner FROM main.machines", "table", "main.machines"),
    ("WITH machines AS (SELECT _owner, _deleted FROM main.machines) SELECT * FROM machines",
     "table", "main.machines"),
    (f"SELECT * FROM {live_view('machines', NONCE)}", "table",
     live_view("machines", NONCE)),
    ("SELECT name, sql FROM sqlite_master", "table", "sqlite_master"),
    ("SELECT * FROM origins", "table", "origins"),
    ("INSERT INTO main.machines (id) VALUES ('x')", "read-only", "INSERT on machines"),
    ("UPDATE main.workers SET region = 'x'", "read-only", "UPDATE on workers"),
    ("DELETE FROM main.apps", "read-only", "DELETE on apps"),
    ("CREATE TABLE t (x)", "read-only", "a change to the schema"),
    ("ATTACH ':memory:' AS other", "read-only", "ATTACH"),
    ("PRAGMA journal_mode = DELETE", "read-only", "PRAGMA journal_mode"),
    ("PRAGMA table_info(tokens)", "read-only", "PRAGMA table_info"),
    ("SELECT load_extension('x')", "read-only", "load_extension()"),
    ("BEGIN", "read-only", "BEGIN"),
    ("SAVEPOINT s", "read-only", "SAVEPOINT"),
])
def test_everything_else_is_refused_saying_what(sql: str, kind: str, what: str) -> None:
    with pytest.raises(sqlite3.DatabaseError):
        prepared(sql)
    policy = ReadPolicy(NONCE)
    db = sqlite3.connect(":memory:", isolation_level=None)
    for script in MIGRATIONS:
        db.executescript(script)
    for made in views(NONCE):
        db.execute(made)
    db.set_authorizer(policy.decide)
    with pytest.raises(sqlite3.DatabaseError):
        db.execute(sql)
    assert policy.refusal is not None
    assert (policy.refusal.kind, policy.refusal.what) == (kind, what)
    if kind == "table":
        assert policy.refusal.message.startswith(f"no such table: {what}; the tables you may "
                                                 "query: apps, autoscale, autoscale_runs, images")
    else:
        assert policy.refusal.message.startswith("the registry is read-only through this API")


def test_only_the_connection_s_own_views_read_the_raw_tables() -> None:
    policy = ReadPolicy(NONCE)
    assert policy.decide(Action.READ, "machines", "_doc", "main",
                         live_view("machines", NONCE)) == Verdict.OK
    assert policy.decide(Action.READ, "machines", "_doc", "main",
                         live_view("machines", "another")) == Verdict.DENY
    assert policy.decide(Action.READ, "tokens", "token_hash", "main",
                         live_view("machines", NONCE)) == Verdict.DENY
    assert policy.decide(Action.READ, "machines", "_doc", "main", "machines") == Verdict.DENY
    assert policy.tables == {"machines"}
    assert set(PUBLIC) >= policy.tables
