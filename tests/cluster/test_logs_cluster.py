"""Machine logs in a real cluster: one machine's from its worker, an app's from the broker.

Two workers (process driver, machines in namespaces) and a broker, each its
own process. Each machine prints a numbered line every 0.2 s; the test reads
the past lines, then follows, for one machine and for the whole app.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.python_kit import machine_python
from tests.tls_kit import TEST_CA

from .fleet_kit import fleet, serving, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

TICKER = ("import time\n"
          "i = 0\n"
          "while True:\n"
          "    print('tick', i, flush=True); i += 1; time.sleep(0.2)\n")
FIELDS = {"timestamp", "app", "machine_id", "region", "instance_id", "stream", "message"}


def ticker() -> dict[str, Any]:
    return {"image": "local/ticker", "init": {"exec": [machine_python(), "-u", "-c", TICKER]},
            "guest": {"cpus": 1, "memory_mb": 128}}


async def read_lines(client: httpx.AsyncClient, url: str, params: dict[str, str],
                     until_count: int) -> list[dict[str, Any]]:
    """Stream NDJSON lines until ``until_count`` arrived, then hang up."""
    lines: list[dict[str, Any]] = []
    async with client.stream("GET", url, params=params) as answer:
        assert answer.status_code == 200, await answer.aread()
        assert answer.headers["content-type"].startswith("application/x-ndjson")
        async for text in answer.aiter_lines():
            if text:
                lines.append(json.loads(text))
            if len(lines) >= until_count:
                break
    return lines


def tick(line: dict[str, Any]) -> int:
    return int(line["message"].split()[1])


async def test_logs_stream_and_follow_for_a_machine_and_an_app(tmp_path: Path) -> None:
    suffix = os.getpid() % 10000
    async with fleet(tmp_path) as f:
        first = f"lw1-{suffix}"
        await f.worker(first, 1)
        await f.worker(f"lw2-{suffix}", 2)
        await f.broker()
        async with f.api() as api:
            await until(lambda: serving(api, 2))
            await api.post("/v1/apps", json={"app_name": "ticks", "org_slug": "personal"})
            ids = []
            for _ in range(2):
                m = (await api.post("/v1/apps/ticks/machines", json={"config": ticker()})).json()
                ids.append(m["id"])
            docs = [(await api.get(f"/v1/apps/ticks/machines/{i}")).json() for i in ids]

            async def printed(count: int) -> bool:
                answer = await api.get("/v1/apps/ticks/logs", params={"limit": "1000"})
                seen = [json.loads(t) for t in answer.text.splitlines() if t]
                return all(sum(1 for s in seen if s["machine_id"] == i) >= count for i in ids)

            await until(lambda: printed(5))

            # One machine, from its worker: the past lines, newest `limit`, every field.
            where = {i: (await api.get(f"/v1/apps/ticks/machines/{i}/placement")).json()
                     ["winner"]["worker"] for i in ids}
            own = next(d for d in docs if where[d["id"]] == first)
            worker = TEST_CA.http(base_url=f.daemons[first].url, timeout=30)
            async with worker:
                past = await worker.get(f"/v1/machines/{own['id']}/logs", params={"limit": "3"})
                lines = [json.loads(t) for t in past.text.splitlines() if t]
                assert len(lines) == 3
                assert set(lines[0]) == FIELDS
                assert {(x["app"], x["machine_id"], x["region"], x["stream"],
                         x["instance_id"]) for x in lines} == {
                    ("ticks", own["id"], "ams", "stdout", own["instance_id"])}
                assert [tick(x) for x in lines] == sorted(tick(x) for x in lines)
                newest = tick(lines[-1])
                followed = await read_lines(worker, f"/v1/machines/{own['id']}/logs",
                                            {"limit": "1", "follow": "true"}, until_count=6)
                assert [tick(x) for x in followed][1:] == list(
                    range(tick(followed[1]), tick(followed[1]) + 5))
                assert tick(followed[-1]) > newest  # lines printed after the request came
                bad = await worker.get(f"/v1/machines/{own['id']}/logs", params={"limit": "x"})
                assert bad.status_code == 400

            # The whole app, from the broker: both machines, merged by time, then followed.
            async with f.api() as stream_api:
                history = await api.get("/v1/apps/ticks/logs", params={"limit": "10"})
                merged = [json.loads(t) for t in history.text.splitlines() if t]
                assert len(merged) == 10
                assert [x["timestamp"] for x in merged] == sorted(x["timestamp"] for x in merged)
                # Each past line is dated when it was written, not when its file last was:
                # `since` a line's time leaves out the lines written before it.
                everything = await api.get("/v1/apps/ticks/logs", params={"limit": "10000"})
                every_line = [json.loads(t) for t in everything.text.splitlines() if t]
                mine = [x for x in every_line if x["machine_id"] == own["id"]]
                assert len(mine) >= 10
                assert mine[-1]["timestamp"] > mine[0]["timestamp"]
                cut = mine[len(mine) // 2]
                since = await api.get("/v1/apps/ticks/logs", params={
                    "limit": "10000", "since": cut["timestamp"], "machine": own["id"]})
                after = [json.loads(t) for t in since.text.splitlines() if t]
                assert all(x["timestamp"] >= cut["timestamp"] for x in after)
                assert min(tick(x) for x in after) > tick(mine[0]), "earlier lines left out"
                followed = await read_lines(stream_api, "/v1/apps/ticks/logs",
                                            {"limit": "1", "follow": "1"}, until_count=12)
                assert {x["machine_id"] for x in followed} == set(ids)
                one = await read_lines(stream_api, "/v1/apps/ticks/logs",
                                       {"machine": ids[1], "follow": "1", "limit": "2"},
                                       until_count=5)
                assert {x["machine_id"] for x in one} == {ids[1]}
            missing = await api.get("/v1/apps/ticks/logs", params={"machine": "nope"})
            assert missing.status_code == 404
            assert (await api.get("/v1/apps/nope/logs")).status_code == 404
