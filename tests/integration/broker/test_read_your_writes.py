"""After any mutation is answered, this broker's lists never show the machine in an older state."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from bodega.model.machine import Machine

from .broker_kit import in_process_cluster, machine

AFTER = {"stop": {"stopping", "stopped"}, "start": {"starting", "started"},
         "delete": {"destroying", "destroyed"}}


async def listed_state(api: httpx.AsyncClient, app: str, machine_id: str) -> str:
    listed = (await api.get(f"/v1/apps/{app}/machines",
                            params={"include_deleted": "true"})).json()
    return str(next(m["state"] for m in listed if m["id"] == machine_id))


async def test_lists_show_each_answered_change_at_once_and_ignore_stale_view_rows(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "rw", "org_slug": "personal"})
            for _ in range(6):
                created = (await api.post("/v1/apps/rw/machines", json=machine())).json()
                mid = created["id"]
                base = f"/v1/apps/rw/machines/{mid}"
                waited = await api.get(f"{base}/wait", params={"state": "started",
                                                               "timeout": 30})
                assert waited.status_code == 200, waited.text
                c.sync()  # the view now holds the started row, which goes stale below
                started_row = c.catalog.get("machines", mid)
                assert started_row is not None
                assert started_row["state"] == "started"
                steps: list[tuple[str, str, str, dict[str, str]]] = [
                    ("stop", "POST", f"{base}/stop", {}), ("start", "POST", f"{base}/start", {}),
                    ("delete", "DELETE", base, {"force": "true"})]
                for step, method, url, params in steps:
                    if step == "start":
                        stopped = await api.get(f"{base}/wait", params={"state": "stopped",
                                                                        "timeout": 30})
                        assert stopped.status_code == 200, stopped.text
                    answer = await api.request(method, url, params=params)
                    assert answer.status_code == 200, (step, answer.text)
                    assert await listed_state(api, "rw", mid) in AFTER[step], step
                    # A stale row arrives late from the view: it must not win.
                    c.catalog.put("machines", mid, started_row)
                    assert await listed_state(api, "rw", mid) in AFTER[step], step
                    got = (await api.get(base)).json()
                    assert got["state"] in AFTER[step] | {"destroyed"}, step
                # Nor does a list without include_deleted show it from the stale row.
                plain = (await api.get("/v1/apps/rw/machines")).json()
                assert {m["id"]: m["state"] for m in plain}.get(mid) in (None, "destroying")


async def test_a_late_answer_never_replaces_a_newer_doc(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        broker = await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "late", "org_slug": "personal"})
            created = (await api.post("/v1/apps/late/machines", json=machine())).json()
            base = f"/v1/apps/late/machines/{created['id']}"
            assert (await api.get(f"{base}/wait", params={"state": "started",
                                                          "timeout": 30})).status_code == 200
            # Two reads race; the older one's answer is applied last.
            older = {**created, "app": "late", "worker": "ams-1", "state": "started"}
            assert (await api.post(f"{base}/stop")).status_code == 200
            broker.workers.note_machine(Machine.model_validate(older))
            await asyncio.sleep(0)
            assert await listed_state(api, "late", created["id"]) in AFTER["stop"]


async def test_a_machine_another_broker_destroyed_is_not_listed_from_an_older_copy(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A list without ``include_deleted`` skips destroyed rows unread, yet the older copy
    this broker holds of such a machine must stay hidden behind the row's own time."""
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        await c.add_broker()
        async with c.api(0) as first, c.api(1) as second:
            await first.post("/v1/apps", json={"app_name": "gone", "org_slug": "personal"})
            created = (await first.post("/v1/apps/gone/machines", json=machine())).json()
            base = f"/v1/apps/gone/machines/{created['id']}"
            waited = await first.get(f"{base}/wait", params={"state": "started", "timeout": 30})
            assert waited.status_code == 200, waited.text
            assert (await first.get(base)).json()["state"] == "started"  # held by broker 0
            destroyed = await second.delete(base, params={"force": "true"})
            assert destroyed.status_code == 200, destroyed.text
            c.sync()
            assert c.catalog.tables["machines"][created["id"]]["state"] == "destroyed"

            assert (await first.get("/v1/apps/gone/machines")).json() == []
            assert (await first.get("/v1/apps/gone")).json()["machine_count"] == 0
            assert await listed_state(first, "gone", created["id"]) == "destroyed"

            # A destroyed row no model of this version can read is not even looked at. It
            # goes into the view's table unannounced, so only a list can come to read it.
            c.catalog.tables["machines"]["f" * 14] = {
                **c.catalog.tables["machines"][created["id"]], "id": "f" * 14,
                "config": "not a config"}
            with caplog.at_level("WARNING", logger="bodega.model.answer"):
                assert (await first.get("/v1/apps/gone/machines")).json() == []
                assert "cannot be read" not in caplog.text
                await first.get("/v1/apps/gone/machines", params={"include_deleted": "true"})
                assert "cannot be read" in caplog.text
