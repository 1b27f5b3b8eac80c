"""The ``/sched`` API reads the article's ``Restart`` as a JSON boolean: a string is
not one ("yes", "false" and "0" would otherwise be taken as true or false), so it is a
400 naming the field, and nothing is submitted."""

from __future__ import annotations

from pathlib import Path

from .broker_kit import in_process_cluster


async def test_restart_must_be_a_boolean(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            for wrong in ("yes", "true", "false", 1, 0):
                answer = await api.post("/sched/submit", json={
                    "Name": "frick", "Command": "sleep 1", "Restart": wrong})
                assert answer.status_code == 400, (wrong, answer.text)
                assert answer.json()["status"] == "invalid_argument", answer.text
                assert "Restart" in answer.json()["error"], answer.text
            listed = await api.get("/sched/jobs", params={"state": "any"})
            assert listed.status_code == 200, listed.text
            assert listed.json() == [], "a refused submit made a job"
            ok = await api.post("/sched/submit", json={
                "Name": "frick", "Command": "sleep 1", "Restart": True})
            assert ok.status_code in (200, 201), ok.text
