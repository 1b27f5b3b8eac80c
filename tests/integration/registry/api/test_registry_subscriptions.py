"""``/v1/subscriptions`` on a replica the real View and Replica wrote: the initial rows,
then a change line for each insert, update and delete once the agent says the table
changed; resuming from a change, across a restart of the API on the same state dir;
410 once the changes asked for are no longer kept, 404 for an id never made."""

from __future__ import annotations

from pathlib import Path

from bodega.registry.api import QueryLimits
from bodega.wire.public.queries import QUERY_ID_HEADER
from tests.integration.registry.api.queries_kit import (
    Node,
    machine,
    replica_file,
    serving,
    streamed,
)

STARTED = "SELECT id, state FROM machines WHERE state = 'started' ORDER BY id"


def write(node: Node, machine_id: str, state: str | None) -> None:
    node.write("machines", machine_id, None if state is None else machine(machine_id, state))


async def test_initial_rows_then_inserts_updates_and_deletes(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        write(node, "m1", "started")
        write(node, "m2", "stopped")
        async with serving(node, tmp_path / "state") as api, api.client() as client, \
                streamed(client, "POST", "/v1/subscriptions",
                         "SELECT id, state, json_extract(doc, '$.config.image') FROM machines"
                         ) as answer:
            assert answer.response.status_code == 200
            sub = answer.response.headers[QUERY_ID_HEADER]
            assert await answer.take(3) == [
                {"columns": ["id", "state", "json_extract(doc, '$.config.image')"]},
                {"row": [1, ["m1", "started", "registry.example/web:1"]]},
                {"row": [2, ["m2", "stopped", "registry.example/web:1"]]}]
            eoq = await answer.next()
            assert eoq["eoq"]["change_id"] == 0

            write(node, "m3", "started")
            api.queries.changed(["machines"])
            assert await answer.next() == {
                "change": ["insert", 3, ["m3", "started", "registry.example/web:1"], 1]}
            write(node, "m1", "stopped")
            api.queries.changed(["machines"])
            assert await answer.next() == {
                "change": ["update", 1, ["m1", "stopped", "registry.example/web:1"], 2]}
            write(node, "m2", None)
            api.queries.changed(["machines"])
            assert await answer.next() == {
                "change": ["delete", 2, ["m2", "stopped", "registry.example/web:1"], 3]}

            # The same statement again is the same subscription, current as of change 3.
            async with streamed(client, "POST", "/v1/subscriptions",
                                "SELECT id, state, json_extract(doc, '$.config.image') "
                                "FROM machines") as again:
                assert again.response.headers[QUERY_ID_HEADER] == sub
                lines = await again.take(4)
                assert sorted(line["row"][0] for line in lines[1:3]) == [1, 3]
                assert lines[3]["eoq"]["change_id"] == 3


async def test_a_burst_of_changes_reruns_a_subscription_once(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        async with serving(node, tmp_path / "state") as api, api.client() as client, \
                streamed(client, "POST", "/v1/subscriptions", STARTED) as answer:
            sub = answer.response.headers[QUERY_ID_HEADER]
            await answer.take(2)  # columns, eoq: no machine yet
            reruns = api.queries.subscriptions.reruns
            api.queries.changed(["apps", "workers"])  # read by no subscription: no re-run
            assert api.queries.subscriptions.pending == set()
            for n in range(50):
                write(node, f"m{n}", "started")
                api.queries.changed(["machines"])
            assert api.queries.subscriptions.pending == {sub}
            changes = await answer.take(50)
            assert [c["change"][:2] for c in changes] == [["insert", n] for n in range(1, 51)]
            assert api.queries.subscriptions.reruns == reruns + 1


async def test_resume_from_a_change_and_across_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with replica_file(tmp_path) as node:
        write(node, "m1", "started")
        async with serving(node, state) as api, api.client() as client:
            async with streamed(client, "POST", "/v1/subscriptions", STARTED) as answer:
                sub = answer.response.headers[QUERY_ID_HEADER]
                await answer.take(3)
                write(node, "m2", "started")
                write(node, "m1", "stopped")
                api.queries.changed(["machines"])  # one re-run: deletes come first
                assert await answer.take(2) == [
                    {"change": ["delete", 1, ["m1", "started"], 1]},
                    {"change": ["insert", 2, ["m2", "started"], 2]}]
            # A client that saw change 1 gets change 2, then the live ones.
            async with streamed(client, "GET", f"/v1/subscriptions/{sub}?from=1") as resumed:
                assert resumed.response.headers[QUERY_ID_HEADER] == sub
                assert await resumed.next() == {"change": ["insert", 2, ["m2", "started"], 2]}
                write(node, "m3", "started")
                api.queries.changed(["machines"])
                assert await resumed.next() == {"change": ["insert", 3, ["m3", "started"], 3]}
            # Without from: the current rows, then the changes.
            async with streamed(client, "GET", f"/v1/subscriptions/{sub}") as current:
                assert await current.take(4) == [
                    {"columns": ["id", "state"]}, {"row": [2, ["m2", "started"]]},
                    {"row": [3, ["m3", "started"]]}, {"eoq": {"time": 0.0, "change_id": 3}}]

        # The agent is down: the replica changes, and nobody says so.
        write(node, "m2", "stopped")
        write(node, "m4", "started")

        async with serving(node, state) as api, api.client() as client, \
                streamed(client, "GET", f"/v1/subscriptions/{sub}?from=3") as resumed:
            assert resumed.response.status_code == 200
            assert await resumed.take(2) == [
                {"change": ["delete", 2, ["m2", "started"], 4]},
                {"change": ["insert", 4, ["m4", "started"], 5]}]
            write(node, "m4", "stopped")
            api.queries.changed(["machines"])
            assert await resumed.next() == {"change": ["delete", 4, ["m4", "started"], 6]}


async def test_a_from_no_longer_kept_is_gone_and_an_unknown_id_is_404(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        limits = QueryLimits(kept_changes=2)
        async with serving(node, tmp_path / "state", limits) as api, api.client() as client:
            async with streamed(client, "POST", "/v1/subscriptions", STARTED) as answer:
                sub = answer.response.headers[QUERY_ID_HEADER]
                await answer.take(2)
                for n in range(4):
                    write(node, f"m{n}", "started")
                    api.queries.changed(["machines"])
                    await answer.next()
            # Changes 3 and 4 are kept: from=2 resumes, from=1 asks for the trimmed change 2.
            async with streamed(client, "GET", f"/v1/subscriptions/{sub}?from=2") as resumed:
                assert [line["change"][3] for line in await resumed.take(2)] == [3, 4]
            gone = await client.get(f"/v1/subscriptions/{sub}", params={"from": "1"})
            assert gone.status_code == 410
            assert gone.json() == {
                "error": "change 2 is no longer kept (the log starts after change 2): "
                         "subscribe again for the whole result", "status": "gone"}
            ahead = await client.get(f"/v1/subscriptions/{sub}", params={"from": "9"})
            assert ahead.status_code == 400
            assert "beyond this subscription's last change (4)" in ahead.json()["error"]
            unknown = await client.get("/v1/subscriptions/nosuch", params={"from": "0"})
            assert unknown.status_code == 404
            assert unknown.json()["status"] == "not_found"
            assert (await client.get("/v1/subscriptions/nosuch")).status_code == 404


async def test_a_subscription_is_refused_like_a_query(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        for n in range(5):
            write(node, f"m{n}", "started")
        async with serving(node, tmp_path / "state", QueryLimits(rows=3)) as api, \
                api.client() as client:
            write_refused = await client.post("/v1/subscriptions", json="DELETE FROM machines")
            assert write_refused.status_code == 403
            too_big = await client.post("/v1/subscriptions", json=STARTED)
            assert too_big.status_code == 400
            assert "a subscription's result must be whole" in too_big.json()["error"]
            assert "row limit (3 rows)" in too_big.json()["error"]
