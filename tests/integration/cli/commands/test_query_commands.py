"""``bodega query`` and ``bodega watch`` against a served RegistryQueries (mounted on a plain
Starlette app, as the broker's forwarding would reach it): a table or NDJSON, one-line
errors, changes as they come, Ctrl-C, and resuming where a watch stopped."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from asyncio.subprocess import Process
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tests.integration.registry.api.queries_kit import (
    ADMIN,
    Node,
    machine,
    replica_file,
    serving,
)

LINE_WAIT = 20.0


def environment(tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("BODEGA_")},
            "BODEGA_CONFIG": str(tmp_path / "config.toml")}


async def bodega(tmp_path: Path, url: str, *args: str, token: str = ADMIN
                 ) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", *args, "--api-url", url, "--token", token,
        cwd=tmp_path, env=environment(tmp_path), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


def fill(node: Node) -> None:
    node.write("machines", "m1", machine("m1", "started"))
    node.write("machines", "m2", machine("m2", "stopped"))


async def test_query_prints_a_table_or_ndjson_and_errors_in_one_line(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        fill(node)
        async with serving(node, tmp_path / "state") as api:
            code, out, err = await bodega(
                tmp_path, api.url, "query", "SELECT id, app, state FROM machines ORDER BY id")
            assert (code, err) == (0, "")
            assert [line.split() for line in out.splitlines()] == [
                ["id", "app", "state"], ["m1", "web", "started"], ["m2", "web", "stopped"]]

            code, out, err = await bodega(
                tmp_path, api.url, "query", "--json",
                "SELECT id, json_extract(doc, '$.config.image') AS image FROM machines "
                "WHERE state = ?", "-p", "stopped")
            assert (code, err) == (0, "")
            assert [json.loads(line) for line in out.splitlines()] == [
                {"id": "m2", "image": "registry.example/web:1"}]

            for sql, line in (
                    ("SELECT * FROM tokens", "Error: invalid_argument: no such table: tokens; "
                     "the tables you may query: apps, autoscale, autoscale_runs, images, "
                     "ip_assignments, jobs, machines, releases, sched_workers, volumes, "
                     "workers"),
                    ("DELETE FROM machines", "Error: the registry is read-only through this "
                     "API: the statement would write (cannot modify machines because it is a "
                     "view)")):
                code, out, err = await bodega(tmp_path, api.url, "query", sql)
                assert (code, out, err.splitlines()) == (1, "", [line])

            code, out, err = await bodega(tmp_path, api.url, "query", "SELECT 1",
                                          token="wrong")
            assert code == 1
            assert len(err.splitlines()) == 1
            assert err.startswith(f"Error: unauthorized at {api.url}")


async def test_query_shows_the_rows_before_a_cut_then_the_bound(tmp_path: Path) -> None:
    from bodega.registry.api import QueryLimits

    with replica_file(tmp_path) as node:
        for n in range(4):
            node.write("machines", f"m{n}", machine(f"m{n}"))
        async with serving(node, tmp_path / "state", QueryLimits(rows=2)) as api:
            code, out, err = await bodega(tmp_path, api.url, "query",
                                          "SELECT id FROM machines ORDER BY id")
            assert code == 1
            assert out.split() == ["id", "m0", "m1"]
            assert err.startswith("Error: query cut at the row limit (2 rows)")
            assert len(err.splitlines()) == 1


@asynccontextmanager
async def watching(tmp_path: Path, url: str, *args: str) -> AsyncIterator[Process]:
    """``bodega watch ARGS`` running; killed if the test ends before it does."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "watch", *args, "--api-url", url, "--token", ADMIN,
        cwd=tmp_path, env=environment(tmp_path), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.communicate()


async def next_line(stream: asyncio.StreamReader | None) -> str:
    assert stream is not None
    async with asyncio.timeout(LINE_WAIT):
        return (await stream.readline()).decode().rstrip("\n")


async def test_watch_prints_rows_then_changes_and_resumes_after_ctrl_c(tmp_path: Path) -> None:
    with replica_file(tmp_path) as node:
        fill(node)
        async with serving(node, tmp_path / "state") as api:
            async with watching(tmp_path, api.url, "SELECT id, state FROM machines "
                                "WHERE state = 'started'") as process:
                assert [await next_line(process.stdout) for _ in range(2)] == [
                    "id  state  ", "m1  started"]
                said = await next_line(process.stderr)
                assert said.startswith("subscription ")
                assert said.endswith(
                    ", at change 0; changes follow (Ctrl-C ends)")
                sub = said.split()[1].rstrip(",")

                node.write("machines", "m2", machine("m2", "started"))
                api.queries.changed(["machines"])
                assert await next_line(process.stdout) == "#1 insert row 2: id=m2 state=started"
                node.write("machines", "m1", machine("m1", "stopped"))
                api.queries.changed(["machines"])
                assert await next_line(process.stdout) == "#2 delete row 1: id=m1 state=started"

                process.send_signal(signal.SIGINT)
                async with asyncio.timeout(LINE_WAIT):
                    rest, errors = await process.communicate()
                assert process.returncode == 0, errors
                assert rest == b""
                assert errors.decode().splitlines() == [
                    f"stopped at change 2; resume with: bodega watch --id {sub} --from 2"]

            # Meanwhile another change; resuming from 1 replays 2, then this one.
            node.write("machines", "m3", machine("m3", "started"))
            api.queries.changed(["machines"])
            async with watching(tmp_path, api.url, "--id", sub, "--from", "1") as process:
                assert [await next_line(process.stdout) for _ in range(2)] == [
                    "#2 delete row 1: m1  started", "#3 insert row 3: m3  started"]
                process.send_signal(signal.SIGINT)
                async with asyncio.timeout(LINE_WAIT):
                    _, errors = await process.communicate()
                assert process.returncode == 0, errors


async def test_watch_refusals_are_one_line(tmp_path: Path) -> None:
    from bodega.registry.api import QueryLimits

    with replica_file(tmp_path) as node:
        async with serving(node, tmp_path / "state", QueryLimits(kept_changes=1)) as api:
            code, _, err = await bodega(tmp_path, api.url, "watch", "--id", "nosuch",
                                          "--from", "0")
            assert (code, err.splitlines()) == (1, [
                "Error: no subscription nosuch (expired, or never made here)"])
            code, _, err = await bodega(tmp_path, api.url, "watch", "--from", "3")
            assert (code, err.splitlines()) == (1, [
                "Error: --from resumes a subscription: give its --id too"])
            code, _out, err = await bodega(tmp_path, api.url, "watch")
            assert code == 1
            assert "give a SQL statement to watch, or --id" in err
