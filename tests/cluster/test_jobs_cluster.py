"""Jobs run by bodega's own workers, on a real `bodega up` (two workers, process driver).

Scenarios share the cluster, each on its own app, run at once: the article's
shape runs; a task is a machine (auto_destroy, restart no, cgroups, events,
/wait, its output kept); the exit code decides success, a failed attempt is
retried after its backoff until max_attempts; late binding spreads a job's
tasks over both workers, each run once; cancel drops a queued task and stops a
running one (SIGTERM within 2 s, SIGKILL after the grace); an idempotency key
maps to one job; a running task past its deadline is stopped and fails; the CLI
submits, follows (--wait), shows, lists, cancels and prints a task's output.
Then, alone: a full queue answers 429 with Retry-After.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from bodega.wire.public.jobs.api import SubmitBody
from tests.cluster.deploy_kit import concurrently, readable_dir
from tests.cluster.jobs_kit import Jobs, jobs_up, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

QUEUE_LIMIT = 60


async def article_shape(jobs: Jobs) -> None:
    app = await jobs.app("jb-article")
    answer = await jobs.submit(app, {"Name": "frick", "Command": "sleep 1", "Restart": True})
    assert answer.status_code == 200, answer.text
    assert answer.json()["home"] in jobs.workers
    job = await jobs.finished(app, "frick")
    assert job.state == "succeeded"
    (task,) = job.tasks or []
    assert (task.attempts, task.exit_codes) == (1, [0])
    assert task.worker in jobs.workers
    assert task.machine_id
    # The article's config as written: a list, each element a job of its own.
    answer = await jobs.http.post("/sched/submit", params={"app": app}, json=[
        {"Name": "frack", "Command": "sleep 1"}, {"Name": "frick", "Command": "true"},
        {"Name": "frock", "Command": "sh -c 'echo done'"}])
    assert answer.status_code == 200, answer.text
    # Each element committed on its own: running already where its home had a warm slot
    # free (it starts at its submit), queued otherwise; the taken name refused alone.
    states = [item.get("state") for item in answer.json()]
    assert states[1] is None
    assert {states[0], states[2]} <= {"queued", "running"}, states
    assert answer.json()[1]["status"] == "name_taken", answer.text
    for name in ("frack", "frock"):
        assert (await jobs.finished(app, name)).state == "succeeded"
    frock = await jobs.api.status("frock", app)
    assert [t.output for t in frock.tasks or []] == [["done"]], frock.tasks


async def task_is_a_machine(jobs: Jobs) -> None:
    app = await jobs.app("jb-machine")
    answer = await jobs.submit(app, {"name": "watched",
                                     "command": ["sh", "-c", "echo out-of-task; sleep 4"]})
    assert answer.status_code == 200, answer.text

    async def running_machine() -> str | None:
        job = await jobs.status(app, "watched")
        task = next(iter(job.tasks or []), None)
        return task.machine_id if task is not None and task.state == "running" else None

    machine_id: str = await until(running_machine, timeout=60)
    machine = (await jobs.http.get(f"/v1/apps/{app}/machines/{machine_id}")).json()
    assert machine["config"]["auto_destroy"] is True
    assert machine["config"]["restart"]["policy"] == "no"
    # A host program's task runs in a warm slot: a machine of the task's size that runs
    # tasks of its shape one after another, kept warm while idle until a machine needs
    # its room (slots_give_way) or it has been idle for a while.
    assert "bodega_slot" in machine["config"]["metadata"]
    # The home learns the machine once it is created; its cgroup comes with its start.
    def cgroups() -> list[Path]:
        return list(Path("/sys/fs/cgroup/memory/bodega").glob(f"*/{machine_id}"))

    try:
        await until(cgroups, timeout=30)
    except AssertionError:
        raise AssertionError("the task's machine has no memory cgroup") from None
    job = await jobs.finished(app, "watched")
    assert job.state == "succeeded"
    assert b"out-of-task" in await jobs.api.logs("watched", 0, app)
    slot = (await jobs.http.get(f"/v1/apps/{app}/machines/{machine_id}")).json()
    assert slot["state"] == "started"  # warm, for the next task of its shape


async def retries_and_exit_codes(jobs: Jobs) -> None:
    app = await jobs.app("jb-retry")
    with readable_dir() as shared:
        shared.chmod(0o777)
        marker = shared / "tried"
        flaky = f"test -e {marker} && exit 0; touch {marker}; exit 1"
        for body in ({"name": "always-3", "command": ["sh", "-c", "exit 3"],
                      "max_attempts": 3, "backoff": 0.2},
                     {"name": "flaky", "command": ["sh", "-c", flaky], "backoff": 0.2}):
            answer = await jobs.submit(app, body)
            assert answer.status_code == 200, answer.text
        # A program that is not there: each attempt's machine fails to start, and that is
        # recorded as the attempt's end, not waited out as a lapsed lease.
        answer = await jobs.submit(app, {"name": "cannot-start", "command": ["/no/such/program"],
                                         "max_attempts": 2, "backoff": 0.2,
                                         "lease_seconds": 600})
        assert answer.status_code == 200, answer.text
        # A task that kills the slot it runs in (its parent, the slot's loop): the attempt
        # fails with the slot's end, as a machine of its own would, never given back forever.
        answer = await jobs.submit(app, {"name": "kills-its-slot", "max_attempts": 2,
                                         "backoff": 0.2,
                                         "command": ["sh", "-c", "kill -9 $PPID; sleep 5"]})
        assert answer.status_code == 200, answer.text
        failed = await jobs.finished(app, "always-3")
        flaked = await jobs.finished(app, "flaky")
        unstarted = await jobs.finished(app, "cannot-start")
        killer = await jobs.finished(app, "kills-its-slot")
    (task,) = killer.tasks or []
    assert (killer.state, task.attempts) == ("failed", 2), killer.model_dump_json()
    assert all(code is not None and code != 0 for code in task.exit_codes), task.exit_codes
    (task,) = unstarted.tasks or []
    assert (unstarted.state, task.attempts, task.exit_codes) == ("failed", 2, [127, 127])
    (task,) = failed.tasks or []
    assert (failed.state, task.attempts, task.exit_codes) == ("failed", 3, [3, 3, 3])
    assert "3 of 3 attempts" in (task.reason or "")
    (task,) = flaked.tasks or []
    assert (flaked.state, task.attempts, task.exit_codes) == ("succeeded", 2, [1, 0])


async def late_binding(jobs: Jobs, data_dir: Path) -> None:
    app = await jobs.app("jb-many")
    # 24 tasks, 48 probes over two workers of 16 slots: neither can bind them all.
    answer = await jobs.submit(app, {"name": "many", "command": "sleep 1", "count": 24})
    assert answer.status_code == 200, answer.text
    job = await jobs.finished(app, "many", 120)
    assert job.state == "succeeded"
    tasks = job.tasks or []
    assert len(tasks) == 24
    assert {t.attempts for t in tasks} == {1}  # each task bound to one worker, run once
    assert {t.worker for t in tasks} == set(jobs.workers)

    def probes_left() -> int:  # the probes that got no task are answered "drop" and go
        return sum(_probes(data_dir / "workers" / w / "jobs.db", job.id) for w in jobs.workers)

    await until(lambda: probes_left() == 0, timeout=30)


def _probes(db: Path, job_id: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        (n,) = conn.execute("SELECT coalesce(sum(count), 0) FROM probes_in WHERE job_id = ?",
                            (job_id,)).fetchone()
    return int(n)


async def cancel(jobs: Jobs) -> None:
    app = await jobs.app("jb-cancel")
    with readable_dir() as shared:
        shared.chmod(0o777)
        termed = shared / "termed"
        trap = f"trap 'touch {termed}; exit 143' TERM; while true; do sleep 0.1; done"
        await jobs.submit(app, {"name": "polite", "command": ["sh", "-c", trap]})
        await jobs.submit(app, {"name": "stubborn", "grace_seconds": 1,
                                "command": ["sh", "-c", "trap '' TERM; while true; do "
                                            "sleep 0.1; done"]})
        await jobs.submit(app, {"name": "waiting", "command": "true", "pool": "nobody"})
        for name in ("polite", "stubborn"):
            await until(lambda n=name: _running(jobs, app, n), timeout=60)
        asked = time.monotonic()
        for name in ("polite", "stubborn", "waiting"):
            answer = await jobs.http.post(f"/sched/cancel/{name}", params={"app": app})
            assert answer.status_code == 200, answer.text
        await until(termed.exists, timeout=2.0, every=0.05)  # SIGTERM reached it within 2 s
        assert (await jobs.status(app, "waiting")).state == "cancelled"  # dropped at once
        assert time.monotonic() - asked < 2.0
        polite = await jobs.finished(app, "polite", 10)
        stubborn = await jobs.finished(app, "stubborn", 10)
    assert polite.state == stubborn.state == "cancelled"
    assert (polite.tasks or [])[0].exit_codes == [143]
    assert (stubborn.tasks or [])[0].exit_codes == [137]  # SIGKILL after its 1 s of grace


async def _running(jobs: Jobs, app: str, name: str) -> bool:
    job = await jobs.status(app, name)
    return any(t.state == "running" and t.machine_id for t in job.tasks or [])


async def idempotent(jobs: Jobs) -> None:
    app = await jobs.app("jb-idem")
    # A key whose name-less retry is named (from the key) for the other home than "once"'s:
    # only the broker's routing by key can bring that retry back to the job.
    home = jobs.home_of(app, "once")
    key = next(k for k in (f"build-{i}" for i in range(1000))
               if jobs.home_of(app, SubmitBody(idempotency_key=k).job_name()) != home)
    body = {"name": "once", "command": "sleep 0.2", "idempotency_key": key}
    answers = await asyncio.gather(*(jobs.submit(app, body) for _ in range(5)))
    assert {a.status_code for a in answers} == {200}
    assert len({a.json()["id"] for a in answers}) == 1
    again = await jobs.submit(app, {**body, "name": None})
    assert again.json()["id"] == answers[0].json()["id"]  # the key finds it, name or not
    taken = await jobs.submit(app, {"name": "once", "command": "true"})
    assert (taken.status_code, taken.json()["status"]) == (409, "name_taken")
    # One name, many keys at once: the name's home decides, one job and 409 for the rest.
    racers = await asyncio.gather(*(jobs.submit(app, {"name": "raced", "command": "true",
                                                      "idempotency_key": f"run-{i}"})
                                    for i in range(8)))
    assert sorted(a.status_code for a in racers) == [200] + [409] * 7
    assert len(await jobs.api.jobs(app, state="any")) == 2


async def deadline(jobs: Jobs) -> None:
    app = await jobs.app("jb-deadline")
    await jobs.submit(app, {"name": "late", "command": "sleep 60", "deadline": 3})
    job = await jobs.finished(app, "late", 30)
    (task,) = job.tasks or []
    assert job.state == "failed"
    assert "deadline" in (task.reason or "")


async def cli(jobs: Jobs) -> None:
    app = await jobs.app("jb-cli")
    code, out, err = await jobs.cli("jobs", "submit", "-a", app, "--name", "hello",
                                    "--count", "3", "--wait", "--", "sh", "-c",
                                    "echo hello from $BODEGA_MACHINE_ID")
    assert code == 0, err
    assert "hello: succeeded (0 queued, 0 running, 3 done, 0 failed; 3/3)" in err
    code, out, err = await jobs.cli("jobs", "status", "hello", "-a", app, "--json")
    assert code == 0, err
    status = json.loads(out)
    assert status["counts"]["succeeded"] == 3
    # Each names the machine it ran in, though it ended before any renewal could say so.
    assert all(t["machine_id"] for t in status["tasks"]), status["tasks"]
    for task in status["tasks"]:  # what the user asks next: when, where, and what it printed
        assert task["exit_codes"] == [0], task
        assert task["started_at"] <= task["ended_at"], task
        assert task["worker"] in jobs.workers, task
        assert task["output"] == [f"hello from {task['machine_id']}"], task
    code, out, err = await jobs.cli("jobs", "status", "hello", "-a", app)
    assert code == 0, err
    assert "task 2, its last lines:\n  hello from " in out, out
    code, out, err = await jobs.cli("jobs", "status", "hello", "-a", app, "--json", "-n", "0")
    assert code == 0, err
    assert all("output" not in t for t in json.loads(out)["tasks"]), out
    code, out, _ = await jobs.cli("jobs", "logs", "hello", "-a", app, "--task", "2")
    assert code == 0
    assert out.startswith("hello from ")
    code, out, _ = await jobs.cli("jobs", "list", "-a", app)
    assert "hello" in out
    code, _, err = await jobs.cli("jobs", "submit", "-a", app, "--name", "sad", "--wait",
                                  "--max-attempts", "1", "--", "false")
    assert code == 1
    assert "sad: failed" in err
    code, _, err = await jobs.cli("jobs", "status", "nope", "-a", app)
    assert code == 1
    assert err.strip() == f"Error: job not found: nope in app {app}"


async def full_queue(jobs: Jobs) -> None:
    app = await jobs.app("jb-full")
    home = jobs.workers[0]
    filler = jobs.name_on(home, app, "filler")
    first = await jobs.submit(app, {"name": filler, "command": "true", "pool": "nobody",
                                    "count": QUEUE_LIMIT})
    assert first.status_code == 200, first.text
    refused = await jobs.submit(app, {"name": jobs.name_on(home, app, "more"),
                                      "command": "true"})
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json()["status"] == "resource_exhausted"
    await jobs.http.post(f"/sched/cancel/{filler}", params={"app": app})
    again = await jobs.submit(app, {"name": jobs.name_on(home, app, "more"), "command": "true"})
    assert again.status_code == 200, again.text


async def slots_give_way(jobs: Jobs) -> None:
    """Idle warm slots hold their room only until a machine needs it: the workers show it
    free, and a machine as large as a whole worker is created on one whose room its idle
    slots held, which give way (stopped, then destroyed)."""
    app = await jobs.app("jb-way")
    await jobs.submit(app, {"name": "warmup", "command": "true", "count": 16})
    job = await jobs.finished(app, "warmup")
    assert job.state == "succeeded"
    slots: dict[str, set[str]] = {}  # worker -> its slots that ran the job's tasks
    for task in job.tasks or []:
        assert task.worker
        assert task.machine_id
        slots.setdefault(task.worker, set()).add(task.machine_id)
    assert sorted(slots) == sorted(jobs.workers), slots  # each worker's room is held
    whole: dict[str, str | int] = {"cpu_kind": "shared", "cpus": 4, "memory_mb": 4096}

    async def shown_free() -> bool:
        regions = (await jobs.http.get("/v1/platform/regions", params=whole)).json()
        return any(r["code"] == "ams" and r["capacity"] >= len(jobs.workers)
                   for r in regions["Regions"])

    await until(shown_free, timeout=10)
    for held in slots.values():  # still warm as the machine comes
        for machine_id in held:
            slot = (await jobs.http.get(f"/v1/apps/{app}/machines/{machine_id}")).json()
            assert slot["state"] == "started", slot
    answer = await jobs.http.post(f"/v1/apps/{app}/machines", json={"region": "ams", "config": {
        "image": "bodega/process", "init": {"exec": ["sleep", "600"]}, "guest": whole}})
    assert answer.status_code == 200, answer.text

    async def gave_way(machine_id: str) -> bool:
        found = await jobs.http.get(f"/v1/apps/{app}/machines/{machine_id}")
        return found.status_code == 404 or found.json()["state"] == "destroyed"

    async def one_worker_cleared() -> bool:
        for held in slots.values():
            if all([await gave_way(machine_id) for machine_id in held]):
                return True
        return False

    await until(one_worker_cleared, timeout=30)
    await jobs.http.delete(f"/v1/apps/{app}/machines/{answer.json()['id']}",
                           params={"force": "true"})


async def test_jobs_on_bodegas_own_workers(tmp_path: Path) -> None:
    async with jobs_up(tmp_path, worker_args=(f"--job-queue-limit={QUEUE_LIMIT}",)) as (jobs, up):
        await concurrently(
            article_shape=article_shape(jobs), task_is_a_machine=task_is_a_machine(jobs),
            retries=retries_and_exit_codes(jobs), late_binding=late_binding(jobs, up.data_dir),
            cancel=cancel(jobs), idempotent=idempotent(jobs), deadline=deadline(jobs),
            cli=cli(jobs))
        await full_queue(jobs)
        await slots_give_way(jobs)
