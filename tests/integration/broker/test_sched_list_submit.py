"""``POST /sched/submit`` with a JSON list, the article's config as written: each element
is a job of its own, answered in the list's order with its status or its own refusal,
and a refused element costs no other its job."""

from __future__ import annotations

from pathlib import Path

from .broker_kit import in_process_cluster


async def test_a_list_submits_each_element_as_a_job_of_its_own(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_worker("ams-2")
        await c.add_broker()
        async with c.api() as api:
            first = await api.post("/sched/submit", json={"Name": "frick", "Command": "sleep 1",
                                                          "Restart": True})
            assert first.status_code == 200, first.text
            answer = await api.post("/sched/submit", json=[
                {"Name": "frack", "Command": "sleep 5"},
                {"Name": "bad", "Command": "true", "Restart": "yes"},
                "not a job",
                {"Name": "frick", "Command": "sleep 2"},  # a name taken already
                {"name": "plain", "command": ["echo", "hi"], "count": 3},
            ])
            assert answer.status_code == 200, answer.text
            items = answer.json()
            assert [item.get("name") for item in items] == [
                "frack", "bad", None, "frick", "plain"], items
            assert [items[0].get("state"), items[4].get("state")] == ["queued"] * 2, items
            assert items[0]["command"] == ["sleep", "5"], items
            assert items[4]["count"] == 3, items
            assert items[0]["app"] == "jobs", "a submit naming no app goes to the app jobs"
            refused = {i: items[i] for i in (1, 2, 3)}
            for index, item in refused.items():
                assert item["index"] == index, item
                assert "id" not in item, item
            assert refused[1]["status"] == "invalid_argument", refused[1]
            assert "Restart" in refused[1]["error"], refused[1]
            assert refused[2]["error"] == "element 2 is not a JSON object", refused[2]
            assert refused[3]["status"] == "name_taken", refused[3]
            listed = await api.get("/sched/jobs", params={"state": "any"})
            assert sorted(job["name"] for job in listed.json()) \
                == ["frack", "frick", "plain"], listed.text
            frick = await api.get("/sched/status/frick")
            assert frick.json()["command"] == ["sleep", "1"], \
                "the refused second frick changed the first"

async def test_a_list_is_refused_whole_only_when_empty_or_too_long(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            for body, words in (([], "an empty list submits nothing"),
                                ([{}] * 10_001, "at most 10000 jobs in one submit"),
                                ("frick", "a job (an object) or a list of jobs")):
                answer = await api.post("/sched/submit", json=body)
                assert answer.status_code == 400, answer.text
                assert words in answer.json()["error"], answer.text
            listed = await api.get("/sched/jobs", params={"state": "any"})
            assert listed.json() == [], "a refused list made a job"
