"""``bodega jobs submit -f FILE`` as a user types it, against a real broker and workers
(in-process, null driver): the article's config file of jobs submitted in one request, a
line per job, exit 1 when the broker refused one, and a file with a mistake refused in
one line before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path

from bodega.cli.commands.tasks_file import PER_REQUEST
from tests.integration.broker.broker_kit import in_process_cluster
from tests.integration.cli.commands.test_volume_commands import bodega

ARTICLE = [{"Name": "frick", "Command": "sleep 1", "Restart": True},
           {"Name": "frack", "Command": "sleep 5"}]


async def test_a_file_of_jobs_is_submitted_as_the_article_writes_it(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps(ARTICLE, indent=2))
    async with in_process_cluster(tmp_path / "cluster") as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        url = c.brokers[0].url
        code, out, err = await bodega(url, "jobs", "submit", "-a", "batch", "-f", str(tasks))
        assert code == 1, (out, err)
        assert "Error: job 0 (frick) refused: app not found: batch" in err, err
        async with c.api() as api:
            made = await api.post("/v1/apps", json={"app_name": "batch", "org_slug": "personal"})
            assert made.status_code == 201, made.text

        code, out, err = await bodega(url, "jobs", "submit", "-a", "batch", "-f", str(tasks))
        assert code == 0, (out, err)
        lines = out.splitlines()
        assert [line.split(":")[0] for line in lines] == ["Job frick", "Job frack"], out
        assert "1 task(s) queued in pool bodega" in lines[0], out
        assert "2 jobs submitted" in err, err

        # Again: both names are taken now, each said in a line, and the exit code says so.
        code, out, err = await bodega(url, "jobs", "submit", "-a", "batch", "-f", str(tasks))
        assert code == 1, (out, err)
        assert "Error: job 0 (frick) refused: a job named 'frick' already exists" in err, err
        assert "Error: job 1 (frack) refused" in err, err
        assert "2 of 2 jobs refused" in err, err

        one = tmp_path / "one.json"
        one.write_text(json.dumps({"Name": "solo", "Command": ["echo", "hi"], "count": 2}))
        code, out, err = await bodega(url, "jobs", "submit", "-a", "batch", "-f", str(one),
                                      "--json")
        assert code == 0, (out, err)
        [job] = json.loads(out)
        assert (job["name"], job["count"], job["app"]) == ("solo", 2, "batch"), job

        async with c.api() as api:
            listed = await api.get("/sched/jobs", params={"state": "any", "app": "batch"})
        assert sorted(j["name"] for j in listed.json()) == ["frack", "frick", "solo"], \
            listed.text

        # A file longer than a request's share goes in several; each refusal keeps its place.
        many = tmp_path / "many.json"
        many.write_text(json.dumps([{"Name": f"m{i}", "Command": "true", "pool": "later"}
                                    for i in range(PER_REQUEST + 1)] + [ARTICLE[0]]))
        code, out, err = await bodega(url, "jobs", "submit", "-a", "batch", "-f", str(many))
        assert code == 1, err
        assert len(out.splitlines()) == PER_REQUEST + 1, out[-300:]
        assert err.startswith(f"Error: job {PER_REQUEST + 1} (frick) refused: a job named"), err


async def test_a_file_with_a_mistake_submits_nothing(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([ARTICLE[0], {"Name": "frack", "Comand": "sleep 5"}]))
    broken = tmp_path / "broken.json"
    broken.write_text('[{"Name": "frick",')
    async with in_process_cluster(tmp_path / "cluster") as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        url = c.brokers[0].url
        for args, wanted, words in (
                (("-f", str(wrong)), 1, "element 1: invalid_argument: Comand: Extra"),
                (("-f", str(broken)), 1, "is not JSON"),
                (("-f", str(tmp_path / "none.json")), 1, "cannot read"),
                (("-f", str(wrong), "--", "true"), 2, "not both"),
                ((), 2, "give the command to run after")):
            code, out, err = await bodega(url, "jobs", "submit", "-a", "batch", *args)
            assert code == wanted, (args, out, err)
            assert words in " ".join(err.replace("│", "").split()), (args, err)
            if wanted == 1:  # the file's mistake: one line
                assert err.startswith("Error: "), err
                assert err.count("\n") == 1, err
        async with c.api() as api:
            listed = await api.get("/sched/jobs", params={"state": "any", "app": "batch"})
        assert listed.json() == [], "a refused file submitted a job"
