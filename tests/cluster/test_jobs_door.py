"""A job submitted straight to its home at the home's jobs door, on a real `bodega up`.

A broker hands a token's holder a jobs pass and the live workers' doors
(``POST /sched/pass``); ``DirectSubmits`` sends each job to the first worker of its
name's rendezvous order, which commits it and answers as a broker's submit does: the
job is found, listed and run as any other. The door refuses, in the error shape, what
it cannot take: no pass or a forged one (401), a job of another app than the pass's
(403), a job whose home is another worker (421, naming it), a list or a job that runs
after others (421, for a broker), a bad body (400). Jobs that end before their home's first publish
are never in the view: a listing of finished jobs asks the homes, and a job that runs
after one asks its home.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from bodega.wire.public.jobs.api import JobPassAnswer, SubmitBody
from bodega.wire.public.jobs.direct import DirectSubmits
from bodega.wire.transport.json_client import JsonClient
from tests.cluster.jobs_kit import TOKEN, jobs_up

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


async def test_a_job_sent_to_its_homes_door_runs_and_the_door_refuses_what_it_cannot_take(
        tmp_path: Path) -> None:
    async with jobs_up(tmp_path) as (jobs, _up), JsonClient(jobs.url, TOKEN) as broker:
        app = await jobs.app("jb-door")
        other_app = await jobs.app("jb-door-other")
        answer = await jobs.http.post("/sched/pass", params={"app": app})
        assert answer.status_code == 200, answer.text
        granted = JobPassAnswer.model_validate_json(answer.content)
        assert granted.app == app
        assert sorted(d.worker for d in granted.homes) == sorted(jobs.workers)
        doors = {d.worker: d.url for d in granted.homes}

        # Through the client: each job at its home's door, answered as a broker answers.
        direct = DirectSubmits(broker, app)
        for home in jobs.workers:
            name = jobs.name_on(home, app, "direct")
            status = await direct.submit(SubmitBody(name=name, command="sh -c 'echo door'"))
            assert status.home == home
            job = await jobs.finished(app, name)
            assert job.state == "succeeded"
            assert (job.tasks or [])[0].output == ["door"]
        assert (direct.sent_direct, direct.sent_to_broker) == (2, 0)
        listed = {j.name for j in await jobs.api.jobs(app, state="any")}
        assert {jobs.name_on(h, app, "direct") for h in jobs.workers} <= listed
        # A job that runs after others is the broker's to check: it goes there. Its home
        # asks the other home for the state of the job it runs after, which ended at once
        # and was never in the view.
        later = jobs.name_on(jobs.workers[1], app, "later")
        await direct.submit(SubmitBody(name=later, command="true",
                                       after=[jobs.name_on(jobs.workers[0], app, "direct")]))
        assert direct.sent_to_broker == 1
        assert (await jobs.finished(app, later)).state == "succeeded"
        await direct.aclose()

        home, other = jobs.workers
        name = jobs.name_on(home, app, "raw")
        mine = {"authorization": f"Bearer {granted.token}"}
        async with httpx.AsyncClient(timeout=30) as http:
            async def door(worker: str, body: object, headers: dict[str, str] | None = None
                           ) -> httpx.Response:
                return await http.post(f"{doors[worker]}/sched/submit", json=body,
                                       headers=mine if headers is None else headers)

            refused = await door(home, {"name": name, "command": "true"}, headers={})
            assert (refused.status_code, refused.json()["status"]) == (401, "unauthenticated")
            app_token = {"authorization": f"Bearer {TOKEN}"}  # a broker's token is no pass
            assert (await door(home, {"name": name, "command": "true"},
                               app_token)).status_code == 401
            forged = granted.token[:-2] + ("AA" if not granted.token.endswith("AA") else "BB")
            assert (await door(home, {"name": name, "command": "true"},
                               {"authorization": f"Bearer {forged}"})).status_code == 401
            refused = await door(home, {"name": name, "command": "true", "app": other_app})
            assert refused.status_code == 403, refused.text
            refused = await door(other, {"name": name, "command": "true"})
            assert refused.status_code == 421, refused.text
            assert refused.json()["details"] == {"home": home}
            refused = await door(home, [{"name": name, "command": "true"}])
            assert (refused.status_code, refused.json()["status"]) == (421, "misdirected")
            refused = await door(home, {"name": name, "command": "true", "count": 0})
            assert (refused.status_code, refused.json()["status"]) == (400, "invalid_argument")
            refused = await door(home, {"name": name, "comand": "true"})
            assert refused.status_code == 400
            assert "comand" in refused.json()["error"]
            kept = await door(home, {"name": name, "command": "true"})
            assert kept.status_code == 200, kept.text
            again = await door(home, {"name": name, "command": "true"})
            assert (again.status_code, again.json()["status"]) == (409, "name_taken")
        # A token for another app gets no pass for this one.
        answer = await jobs.http.post("/sched/pass", params={"app": "no-such-app"})
        assert answer.status_code == 404, answer.text
