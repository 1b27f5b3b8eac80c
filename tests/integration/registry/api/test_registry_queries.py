"""``POST /v1/queries`` on a replica the real View and Replica wrote, served on loopback:
live rows of the public tables only, refusals as 4xx in bodega's error shape, and answers
cut at their bounds with an error line that names the bound."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx

from bodega.registry.api import QueryLimits
from tests.integration.registry.api.queries_kit import (
    Node,
    machine,
    replica_file,
    serving,
    streamed,
)

# A statement that counts to a billion: seconds of work for SQLite, whatever the machine.
BILLION = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
           "WHERE x < 1000000000) ")


def fill(node: Node) -> None:
    node.write("workers", "w1", {"name": "w1", "region": "ams", "url": "http://w1",
                                 "cordoned": False})
    node.write("apps", "web", {"name": "web", "org_slug": "personal"})
    node.write("machines", "m1", machine("m1", "started"))
    node.write("machines", "m2", machine("m2", "stopped", image="registry.example/web:2"))
    node.write("machines", "m3", machine("m3", "started"))
    node.write("machines", "m3", None)  # a tombstone: never shown
    node.write("tokens", "t1", {"id": "t1", "token_hash": "secret-hash", "scope": "admin"})


async def ask(client: httpx.AsyncClient, body: object) -> tuple[int, list[Any]]:
    async with streamed(client, "POST", "/v1/queries", body) as answer:
        return answer.response.status_code, await answer.rest()


async def test_a_query_answers_its_live_rows_as_ndjson(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        fill(node)
        async with serving(node, tmp_path / "state") as api, api.client() as client:
            status, lines = await ask(client, "SELECT id, app, state FROM machines "
                                              "WHERE state = 'started' ORDER BY id")
            assert status == 200, lines
            assert lines[:2] == [{"columns": ["id", "app", "state"]},
                                 {"row": [1, ["m1", "web", "started"]]}]
            assert list(lines[2]) == ["eoq"]
            assert len(lines) == 3

            status, lines = await ask(client, "SELECT id, doc IS NULL FROM machines ORDER BY id")
            assert lines[1:3] == [{"row": [1, ["m1", 0]]}, {"row": [2, ["m2", 0]]}]
            assert list(lines[3]) == ["eoq"]

            # The document is JSON text; params come as [sql, [params]] or as an object.
            for body in (["SELECT id, json_extract(doc, '$.config.image') AS image "
                          "FROM machines WHERE id = ?", ["m2"]],
                         {"query": "SELECT id, json_extract(doc, '$.config.image') AS image "
                                   "FROM machines WHERE id = :id", "params": {"id": "m2"}}):
                status, lines = await ask(client, body)
                assert (status, lines[:2]) == (200, [
                    {"columns": ["id", "image"]},
                    {"row": [1, ["m2", "registry.example/web:2"]]}]), lines

            # A table shows its key, its indexed columns and doc: no bookkeeping columns.
            status, lines = await ask(client, "SELECT * FROM machines LIMIT 1")
            assert lines[0] == {"columns": ["id", "app", "name", "region", "worker", "state",
                                            "doc"]}


async def test_bad_sql_unknown_names_and_hidden_tables_are_400s(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        fill(node)
        async with serving(node, tmp_path / "state") as api, api.client() as client:
            syntax = await client.post("/v1/queries", json="SELEC id FROM machines")
            assert syntax.status_code == 400
            assert syntax.json() == {"error": 'invalid_argument: near "SELEC": syntax error',
                                     "status": "invalid_argument"}
            for sql, name in (("SELECT * FROM nosuch", "no such table: nosuch"),
                              ("SELECT * FROM tokens", "no such table: tokens"),
                              ("SELECT token_hash FROM main.tokens", "no such table: tokens"),
                              ("SELECT _owner FROM machines", "no such column: _owner"),
                              ("WITH machines AS (SELECT _deleted FROM main.machines) "
                               "SELECT * FROM machines", "no such table: main.machines")):
                refused = await client.post("/v1/queries", json=sql)
                assert refused.status_code == 400, (sql, refused.text)
                error = refused.json()["error"]
                assert name in error, (sql, error)
                assert ("apps, autoscale, autoscale_runs, images, ip_assignments, jobs, machines, "
                        "releases") in error
                assert "secret-hash" not in refused.text
            shape = await client.post("/v1/queries", json={"sql": "SELECT 1"})
            assert shape.status_code == 400
            assert "a statement is a JSON string" in shape.json()["error"]


async def test_a_write_is_refused_and_the_replica_is_unchanged(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        fill(node)
        node.view.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        before = node.view.all_rows()
        digest = hashlib.sha256(node.path.read_bytes()).hexdigest()
        async with serving(node, tmp_path / "state") as api, api.client() as client:
            for sql in ("INSERT INTO machines (id) VALUES ('x')",
                        "UPDATE machines SET state = 'destroyed'",
                        "DELETE FROM main.machines",
                        "DROP TABLE machines",
                        "CREATE TABLE notes (x)",
                        "ATTACH DATABASE 'other.db' AS other",
                        "PRAGMA query_only = 0",
                        "SELECT load_extension('evil')",
                        "BEGIN"):
                refused = await client.post("/v1/queries", json=sql)
                assert refused.status_code == 403, (sql, refused.text)
                assert refused.json()["error"].startswith(
                    "the registry is read-only through this API"), refused.text
        assert node.view.all_rows() == before
        assert hashlib.sha256(node.path.read_bytes()).hexdigest() == digest
        assert not (tmp_path / "other.db").exists()


async def test_a_slow_query_is_cut_at_the_time_limit(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        async with serving(node, tmp_path / "state", QueryLimits(time=0.2)) as api, \
                api.client() as client:
            # Before its first row: a 400 naming the bound.
            cut = await client.post("/v1/queries", json=BILLION + "SELECT count(*) FROM c")
            assert cut.status_code == 400
            assert "query cut at the time limit (0.2 s of work)" in cut.json()["error"]
            # After rows were sent: the rows, then an error line naming the bound.
            status, lines = await ask(client, BILLION + "SELECT x FROM c WHERE x <= 3 "
                                                        "OR x = 1000000000")
            assert status == 200
            assert lines[0] == {"columns": ["x"]}
            rows = lines[1:-1]  # SQLite steps one row ahead: the last before the cut is lost
            assert rows == [{"row": [n, [n]]} for n in range(1, len(rows) + 1)]
            assert rows
            assert "query cut at the time limit (0.2 s of work)" in lines[-1]["error"]


async def test_answers_are_cut_at_the_row_and_size_limits(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        for n in range(10):
            node.write("machines", f"m{n}", machine(f"m{n}"))
        limits = QueryLimits(rows=4, bytes=2000)
        async with serving(node, tmp_path / "state", limits) as api, api.client() as client:
            status, lines = await ask(client, "SELECT id FROM machines ORDER BY id")
            assert status == 200
            assert [line["row"][1] for line in lines[1:5]] == [["m0"], ["m1"], ["m2"], ["m3"]]
            assert "query cut at the row limit (4 rows)" in lines[5]["error"]
            assert "LIMIT" in lines[5]["error"]

            status, lines = await ask(client, "SELECT id, doc, doc, doc FROM machines LIMIT 4")
            assert status == 200
            rows = [line for line in lines if "row" in line]
            assert 0 < len(rows) < 4
            assert "query cut at the size limit (2000 bytes of rows)" in lines[-1]["error"]
            assert "select fewer columns" in lines[-1]["error"]


async def test_every_route_wants_the_admin_token(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        async with serving(node, tmp_path / "state") as api, \
                httpx.AsyncClient(base_url=api.url) as client:
            for method, path in (("POST", "/v1/queries"), ("POST", "/v1/subscriptions"),
                                 ("GET", "/v1/subscriptions/any")):
                for headers in ({}, {"authorization": "Bearer wrong"}):
                    answer = await client.request(method, path, json="SELECT 1",
                                                  headers=headers)
                    assert answer.status_code == 401, (method, path)
                    assert answer.json()["status"] == "unauthenticated"
