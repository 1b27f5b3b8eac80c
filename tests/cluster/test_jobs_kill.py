"""kill -9 of any one component loses no job, on a real `bodega up` (two workers).

Each job's tasks leave a file named by their index (``BODEGA_TASK``) when they start,
so "lost" is checked from what ran, not from what the API says: after each
kill the job ends ``succeeded`` with every index written at least once. In
turn: the broker that answered the submit is killed right after the 200 (and
its registry replica deleted); the job's home is killed while its tasks run;
a worker running tasks (not their home) is killed mid-task. ``bodega up``
restarts each; the home restarts from its ``jobs.db``. Last, the article's shape: a
burst of one-task jobs submitted one by one, each with its idempotency key and asked
again with it until answered (as a client does through a 503 or a lost connection),
while the broker, then a worker that is home to about half of them, is killed: every
job is made once and runs once; and the same burst sent straight to each job's home at
its jobs door (``DirectSubmits``), a home killed: its submits find the restarted home's
new door (or a broker) and are kept once each.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from bodega.model.errors import BodegaError, Unavailable
from bodega.wire.public.jobs.api import JobStatus, SubmitBody
from bodega.wire.public.jobs.direct import DirectSubmits
from bodega.wire.transport.json_client import JsonClient
from tests.cluster.deploy_kit import readable_dir
from tests.cluster.jobs_kit import FINISHED, TOKEN, Jobs, jobs_up, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


def components(data: Path) -> dict[str, dict[str, Any]]:
    try:
        listed = json.loads((data / "cluster.json").read_text())["components"]
    except (OSError, ValueError):
        return {}
    return {c["name"]: c for c in listed}


async def kill9(data: Path, name: str, *, then_delete: str | None = None) -> None:
    """SIGKILL the component and wait until ``bodega up`` has started it again."""
    victim = components(data)[name]
    os.kill(victim["pid"], signal.SIGKILL)
    if then_delete is not None:  # before the supervisor restarts it (it backs off first)
        for path in (data / name).rglob(f"{then_delete}*"):
            path.unlink()
    await until(lambda: (c := components(data).get(name)) is not None and c["pid"]
                and c["pid"] != victim["pid"], timeout=60)


def ran(log: Path) -> set[int]:
    """The task indices that started: each attempt touches a file of its own (machines run as
    users of their own, so they cannot append to one file)."""
    return {int(p.name.split(".")[0]) for p in log.iterdir()} if log.exists() else set()


def job_body(name: str, log: Path, count: int, seconds: float) -> dict[str, Any]:
    log.mkdir()
    log.chmod(0o777)
    # 1.5 GB each: two fit on a worker of 4 GB, so four tasks run on both workers.
    return {"name": name, "count": count, "lease_seconds": 6, "backoff": 0.2,
            "memory_mb": 1536,
            "command": ["sh", "-c", f"touch {log}/$BODEGA_TASK.$BODEGA_ATTEMPT; "
                                   f"sleep {seconds}"]}


async def status(jobs: Jobs, app: str, name: str) -> JobStatus | None:
    """The job's status, or None while the broker or the home is restarting (503)."""
    try:
        return await jobs.status(app, name)
    except (BodegaError, httpx.HTTPError):
        return None


async def until_running_on(jobs: Jobs, app: str, name: str, worker: str) -> None:
    seen: list[JobStatus | None] = [None]

    async def running() -> bool:
        seen[0] = job = await status(jobs, app, name)
        return job is not None and any(t.state == "running" and t.worker == worker
                                       for t in job.tasks or [])
    try:
        await until(running, timeout=60)
    except AssertionError:
        last = seen[0]
        raise AssertionError(f"no task of {name} ran on {worker}: "
                             f"{last.model_dump_json() if last else 'no status'}") from None


async def until_room_on(jobs: Jobs, worker: str, memory_mb: int) -> None:
    """Until the view shows ``worker`` alive with ``memory_mb`` free: the last job's task
    machines there are gone, so the next job's tasks can run on it too."""
    async def room() -> bool:
        listed = (await jobs.http.get("/v1/cluster/workers")).json()
        return any(w["name"] == worker and w["status"] == "alive"
                   and (w.get("free") or {}).get("memory_mb", 0) >= memory_mb for w in listed)
    await until(room, timeout=60)


async def all_ran(jobs: Jobs, app: str, name: str, log: Path, count: int) -> None:
    async def finished() -> JobStatus | None:
        job = await status(jobs, app, name)
        return job if job is not None and job.state in FINISHED and job.tasks else None
    job: JobStatus = await until(finished, timeout=120)
    assert job.state == "succeeded", job.model_dump_json()
    assert ran(log) == set(range(count))
    assert all(t.exit_codes[-1:] == [0] for t in job.tasks or [])


async def submit_until_kept(jobs: Jobs, app: str, body: dict[str, Any]) -> str:
    """Submit until a 200, asking again with the same idempotency key after a refused or lost
    connection or a 503 (the broker or the job's home restarting); the job's id."""
    for _ in range(600):
        try:
            answer = await jobs.submit(app, body)
        except httpx.TransportError:
            await asyncio.sleep(0.1)
            continue
        if answer.status_code == 503:
            await asyncio.sleep(0.1)
            continue
        assert answer.status_code == 200, answer.text
        return str(answer.json()["id"])
    raise AssertionError(f"{body['name']} was never kept")


async def door_until_kept(direct: DirectSubmits, body: dict[str, Any]) -> str:
    """``submit_until_kept`` at the job's home's door: asked again with the same key after a
    503, or an answer lost with its connection (``Indeterminate`` is an ``Unavailable``)."""
    for _ in range(600):
        try:
            return (await direct.submit(SubmitBody.model_validate(body))).id
        except Unavailable:
            await asyncio.sleep(0.1)
    raise AssertionError(f"{body['name']} was never kept")


async def burst(jobs: Jobs, data: Path, app: str, log: Path, victim: str,
                count: int = 30, direct: DirectSubmits | None = None) -> None:
    """``count`` one-task jobs submitted one by one (through a broker, or ``direct`` at their
    homes' doors), ``victim`` killed -9 a third of the way in (while the rest are
    submitted); each job made once (one id for its key) and run once (one file of its own
    per run: the shell's pid)."""
    log.mkdir()
    log.chmod(0o777)
    ids: dict[int, str] = {}
    killed: asyncio.Task[None] | None = None
    for i in range(count):
        if i == count // 3:
            killed = asyncio.create_task(kill9(data, victim))
        tag = f"burst-{victim}-{'door-' if direct else ''}{i}"
        body = {"name": tag, "idempotency_key": tag,
                "command": ["sh", "-c", f"touch {log}/{i}.$$"]}
        ids[i] = await (door_until_kept(direct, body) if direct is not None
                        else submit_until_kept(jobs, app, body))
    assert killed is not None
    await killed
    prefix = f"burst-{victim}-{'door-' if direct else ''}"
    for i, job_id in ids.items():
        job = await until(partial(finished_job, jobs, app, f"{prefix}{i}"), timeout=120)
        assert job.id == job_id, job.model_dump_json()
        assert job.state == "succeeded", job.model_dump_json()
    runs = sorted(int(p.name.split(".")[0]) for p in log.iterdir())
    assert runs == list(range(count)), f"runs per job: {runs}"
    named = [j.name for j in await jobs.api.jobs(app, state="any")
             if j.name.startswith(prefix)]
    assert sorted(named) == sorted(f"{prefix}{i}" for i in range(count))


async def finished_job(jobs: Jobs, app: str, name: str) -> JobStatus | None:
    job = await status(jobs, app, name)
    return job if job is not None and job.state in FINISHED else None


async def test_kill_9_of_any_component_loses_no_job(tmp_path: Path) -> None:
    async with jobs_up(tmp_path) as (jobs, up):
        data = up.data_dir
        app = await jobs.app("jb-kill")
        with readable_dir() as shared:
            shared.chmod(0o777)

            # The broker that took the submit, killed right after its 200, replica deleted.
            log = shared / "broker"
            answer = await jobs.submit(app, job_body("after-broker", log, 6, 0.5))
            assert answer.status_code == 200, answer.text
            await kill9(data, "broker", then_delete="registry.db")
            await all_ran(jobs, app, "after-broker", log, 6)

            async def listed() -> bool:  # the refilled view lists it again
                return "after-broker" in {j.name for j in await jobs.api.jobs(app, state="any")}
            await until(listed, timeout=60)

            # The job's home, killed while its tasks run (some on it, some on the other).
            home, other = jobs.workers
            name = jobs.name_on(home, app, "homed")
            log = shared / "home"
            assert (await jobs.submit(app, job_body(name, log, 4, 3))).status_code == 200
            await until_running_on(jobs, app, name, other)
            await kill9(data, home)
            await all_ran(jobs, app, name, log, 4)

            # A worker running tasks of a job homed elsewhere, killed mid-task (once it has
            # room for two of them again: the last job's machines there may still be going).
            await until_room_on(jobs, other, 2 * 1536)
            name = jobs.name_on(home, app, "runner")
            log = shared / "runner"
            assert (await jobs.submit(app, job_body(name, log, 4, 3))).status_code == 200
            await until_running_on(jobs, app, name, other)
            await kill9(data, other)
            await all_ran(jobs, app, name, log, 4)

            # A burst of single submits through a broker killed -9, then through a home's.
            await burst(jobs, data, app, shared / "burst-broker", "broker")
            await burst(jobs, data, app, shared / "burst-home", home)

            # The same, straight to each job's home at its jobs door, a home killed.
            async with JsonClient(jobs.url, TOKEN) as broker:
                direct = DirectSubmits(broker, app)
                await burst(jobs, data, app, shared / "burst-door", other, direct=direct)
                assert direct.sent_direct > 0
                await direct.aclose()
