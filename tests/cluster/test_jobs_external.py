"""Jobs for external workers, on a real `bodega up`: claim mode, assignment mode, pools.

Scenarios at once, each on its own app: of eight claimants racing for one task
exactly one gets it (200, a lease), the others 409; a lease renewed holds, a
lease left to lapse puts the task back in the queue with its attempt counted
(exit code unknown: null), and only the claimant may release; a job of another
pool is never run by bodega's workers and a bodega-pool job cannot be claimed;
a cancelled task shows in its claimant's /sched/cancellations; a queued task
past its deadline fails; assignment mode fills a registered worker's room
oldest job first and gives the rest as room comes back; the claim-mode worker
in docs/jobs.md, run as it is printed there, runs a pool's jobs to success;
the article's own task shape, naming no app, runs in all three ways.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.deploy_kit import concurrently
from tests.cluster.jobs_kit import Jobs, jobs_up, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "jobs.md"


def docs_worker() -> str:
    """The external worker docs/jobs.md prints (its one ``python`` block)."""
    (code,) = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.DOTALL)
    return str(code)


async def claim_race(jobs: Jobs) -> None:
    app = await jobs.app("jx-claim")
    answer = await jobs.submit(app, {"name": "prize", "command": "true", "pool": "gpu",
                                     "lease_seconds": 2, "backoff": 0})
    assert answer.status_code == 200, answer.text
    await until(lambda: _listed(jobs, app, "gpu", "prize"), timeout=30)
    tries = await asyncio.gather(*(jobs.http.post("/sched/claim/prize", params={"app": app},
                                                  json={"worker": f"racer-{i}"})
                                   for i in range(8)))
    codes = sorted(t.status_code for t in tries)
    assert codes == [200] + [409] * 7, [t.text for t in tries]
    winner = next(t.json() for t in tries if t.status_code == 200)
    assert (winner["attempt"], winner["command"]) == (1, ["true"])
    holder = winner["worker"]
    renewed = await jobs.api.renew("prize", holder, 0, app)
    assert renewed.verdict == "ok"
    not_mine = await jobs.http.post("/sched/release/prize", params={"app": app},
                                    json={"worker": "racer-x", "exit_code": 0})
    assert (not_mine.status_code, not_mine.json()["status"]) == (409, "not_claimant")

    async def requeued() -> Any:  # no renewal: the 2 s lease lapses
        job = await jobs.status(app, "prize")
        task = (job.tasks or [])[0]
        return task if task.state == "queued" and task.attempts == 1 else None

    task = await until(requeued, timeout=30)
    assert task.exit_codes == [None]
    assert "lapsed" in (task.reason or "")
    assert (await jobs.api.renew("prize", holder, 0, app)).verdict == "lost"
    again = await jobs.api.claim("prize", "racer-late", None, app)
    assert again.attempt == 2
    done = await jobs.api.release("prize", "racer-late", 0, None, app)
    assert (done.state, done.job_state) == ("succeeded", "succeeded")


async def _listed(jobs: Jobs, app: str, pool: str, name: str) -> bool:
    return any(j.name == name for j in await jobs.api.jobs(app, pool))


async def pools(jobs: Jobs) -> None:
    app = await jobs.app("jx-pools")
    await jobs.submit(app, {"name": "theirs", "command": "true", "pool": "elsewhere"})
    await jobs.submit(app, {"name": "ours", "command": "sleep 30"})
    refused = await jobs.http.post("/sched/claim/ours", params={"app": app},
                                   json={"worker": "outsider"})
    assert (refused.status_code, refused.json()["status"]) == (409, "wrong_pool")
    await until(lambda: _task_state(jobs, app, "ours", "running"), timeout=60)
    job = await jobs.status(app, "theirs")  # bodega's workers never touched it
    assert (job.state, (job.tasks or [])[0].attempts) == ("queued", 0)
    await jobs.api.cancel("ours", app)


async def _task_state(jobs: Jobs, app: str, name: str, state: str) -> bool:
    return any(t.state == state for t in (await jobs.status(app, name)).tasks or [])


async def cancellations(jobs: Jobs) -> None:
    app = await jobs.app("jx-cancel")
    await jobs.submit(app, {"name": "long", "command": "sleep 100", "pool": "batch"})
    await until(lambda: _listed(jobs, app, "batch", "long"), timeout=30)
    await jobs.api.claim("long", "crunch-1", None, app)
    assert await jobs.api.cancellations("crunch-1", app) == []
    await jobs.api.cancel("long", app)
    found = await until(lambda: jobs.api.cancellations("crunch-1", app), timeout=2.0,
                        every=0.05)
    assert [(c.name, c.task, c.reason) for c in found] == [("long", 0, "cancelled")]
    assert (await jobs.api.renew("long", "crunch-1", 0, app)).verdict == "stop"
    ended = await jobs.api.release("long", "crunch-1", 143, 0, app)
    assert ended.state == "cancelled"


async def deadline(jobs: Jobs) -> None:
    app = await jobs.app("jx-deadline")
    await jobs.submit(app, {"name": "unwanted", "command": "true", "pool": "idle",
                            "deadline": 1})
    job = await jobs.finished(app, "unwanted", 20)
    assert job.state == "failed"
    assert "deadline" in ((job.tasks or [])[0].reason or "")


async def assignment(jobs: Jobs) -> None:
    app = await jobs.app("jx-assign")
    reg = await jobs.http.post("/sched/register", params={"app": app}, json={
        "worker": "big-1", "pool": "assign", "cpu": 2, "mem": 1, "diskfree": "4t"})
    assert reg.status_code == 200, reg.text
    assert (reg.json()["memory_mb"], reg.json()["disk_gb"]) == (1024, 4096)
    for name in ("a1", "a2", "a3"):
        await jobs.submit(app, {"name": name, "command": f"echo {name}", "pool": "assign"})
    await until(lambda: _queued_in_view(jobs, app, "assign", 3), timeout=30)
    first = await jobs.api.assigned("big-1", app)
    assert sorted(a.name for a in first) == ["a1", "a2"]  # room for two, oldest first
    for task in first:
        assert (await jobs.api.started(task.name, "big-1", task.task, app)).verdict == "ok"
    assert sorted(a.name for a in await jobs.api.assigned("big-1", app)) == ["a1", "a2"]
    await jobs.api.stopped("a1", "big-1", 0, 0, app)

    async def third() -> bool:
        return "a3" in {a.name for a in await jobs.api.assigned("big-1", app)}

    await until(third, timeout=30, every=0.3)
    unknown = await jobs.http.get("/sched/assigned", params={"worker": "nobody", "app": app})
    assert unknown.status_code == 404


async def article_shape(jobs: Jobs) -> None:
    """The article's task shape as written, with the admin token and no app: it goes to the
    app ``jobs`` (made on first use) and runs on bodega's workers; with a pool of its own
    it is claimed (claim mode) and assigned (assignment mode), every call naming no app."""
    http = jobs.http
    frick = await http.post("/sched/submit", json={"Name": "frick", "Command": "sleep 1",
                                                    "Restart": True})
    assert frick.status_code == 200, frick.text
    assert frick.json()["app"] == "jobs"
    assert (await jobs.finished("jobs", "frick")).state == "succeeded"
    looked = await http.get("/sched/status/frick")
    assert (looked.status_code, looked.json()["state"]) == (200, "succeeded"), looked.text

    claimed = await http.post("/sched/submit", json={"Name": "frack", "Command": "true",
                                                      "Restart": True, "Pool": "article"})
    assert claimed.status_code == 200, claimed.text
    await until(lambda: _listed(jobs, "jobs", "article", "frack"), timeout=30)
    claim = await http.post("/sched/claim/frack", json={"worker": "article-1"})
    assert claim.status_code == 200, claim.text
    done = await http.post("/sched/release/frack", json={"worker": "article-1",
                                                          "exit_code": 0})
    assert done.status_code == 200, done.text
    assert (await jobs.finished("jobs", "frack")).state == "succeeded"

    reg = await http.post("/sched/register", json={"worker": "article-2", "pool": "assigned",
                                                   "cpu": 1, "mem": 1})
    assert reg.status_code == 200, reg.text
    given = await http.post("/sched/submit", json={"Name": "frock", "Command": "true",
                                                    "Restart": True, "Pool": "assigned"})
    assert given.status_code == 200, given.text

    async def assigned() -> bool:
        answer = await http.get("/sched/assigned", params={"worker": "article-2"})
        assert answer.status_code == 200, answer.text
        return "frock" in {a["name"] for a in answer.json()}

    await until(assigned, timeout=30, every=0.3)


async def _queued_in_view(jobs: Jobs, app: str, pool: str, n: int) -> bool:
    return len(await jobs.api.jobs(app, pool)) == n


async def docs_worker_runs_a_pool(jobs: Jobs, tmp: Path) -> None:
    app = await jobs.app("jx-docs")
    program = tmp / "worker.py"
    program.write_text(docs_worker())
    workers = [await asyncio.create_subprocess_exec(
        sys.executable, str(program), "docs-pool", env=jobs.env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        for _ in range(2)]
    try:
        for i in range(4):
            await jobs.submit(app, {"name": f"d{i}", "command": ["sh", "-c", f"exit {i % 2}"],
                                    "pool": "docs-pool", "max_attempts": 1})
        finished = [await jobs.finished(app, f"d{i}", 60) for i in range(4)]
    finally:
        for worker in workers:
            worker.kill()
            await worker.wait()
    assert [j.state for j in finished] == ["succeeded", "failed"] * 2
    assert all((j.tasks or [])[0].worker not in jobs.workers for j in finished)


async def test_jobs_for_external_workers(tmp_path: Path) -> None:
    async with jobs_up(tmp_path) as (jobs, _):
        await concurrently(
            claim_race=claim_race(jobs), pools=pools(jobs), cancellations=cancellations(jobs),
            deadline=deadline(jobs), assignment=assignment(jobs), article=article_shape(jobs),
            docs_worker=docs_worker_runs_a_pool(jobs, tmp_path))
