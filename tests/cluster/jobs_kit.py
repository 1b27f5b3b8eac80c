"""What the jobs tests share: a real ``bodega up`` (or a fleet of daemons), the /sched API.

``jobs_up`` starts one ``bodega up`` for a test module's scenarios (one region,
``workers`` workers, extra flags for the workers); ``Jobs`` speaks the API both
as typed calls (``JobsApi``) and raw HTTP (to see codes and headers); ``home_of``
finds the name a job needs to land on a given home, as every broker computes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bodega.jobs.homes import job_key, rendezvous
from bodega.wire.public.jobs.api import JobStatus
from bodega.wire.public.jobs.client import JobsApi
from bodega.wire.public.machines_client import MachinesClient
from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.poll_kit import until as poll_until

TOKEN = "jobs-token"
FINISHED = ("succeeded", "failed", "cancelled")


@dataclass
class Jobs:
    url: str
    http: httpx.AsyncClient
    api: JobsApi
    workers: list[str]
    env: dict[str, str]

    async def app(self, name: str) -> str:
        answer = await self.http.post("/v1/apps", json={"app_name": name,
                                                        "org_slug": "personal"})
        assert answer.status_code in (200, 201), answer.text
        return name

    async def submit(self, app: str, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post("/sched/submit", params={"app": app}, json=body)

    async def status(self, app: str, name: str) -> JobStatus:
        return await self.api.status(name, app)

    async def finished(self, app: str, name: str, timeout: float = 90.0) -> JobStatus:
        async def done() -> JobStatus | None:
            job = await self.status(app, name)
            return job if job.state in FINISHED else None
        found: JobStatus = await until(done, timeout=timeout)
        return found

    def home_of(self, app: str, name: str) -> str:
        """The home of a job named ``name`` while every worker is alive."""
        return rendezvous(job_key(app, name), self.workers)[0]

    def name_on(self, home: str, app: str, prefix: str) -> str:
        """A job name whose home is ``home`` while every worker is alive."""
        for i in range(10_000):
            name = f"{prefix}-{i}"
            if rendezvous(job_key(app, name), self.workers)[0] == home:
                return name
        raise AssertionError(f"no name lands on {home}")

    async def cli(self, *args: str, timeout: float = 120.0) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bodega", *args, env=self.env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), timeout)
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()


@contextlib.asynccontextmanager
async def jobs_up(tmp: Path, workers: int = 2,
                  worker_args: tuple[str, ...] = ()) -> AsyncIterator[tuple[Jobs, UpProcess]]:
    api_port, proxy = free_port(), free_port()
    cidr = machine_cidr(150, 200)
    up = UpProcess(tmp / "cluster", "--regions", "ams", "--workers-per-region", str(workers),
                   "--worker-cpus", "4", "--worker-memory-mb", "4096",
                   "--api-port", str(api_port), "--proxy-port", str(proxy), "--proxy-tls-port", "0",
                   "--machine-cidr", cidr, "--token", TOKEN, "--registry-port", "0",
                   *(f"--worker-arg={arg}" for arg in worker_args))
    await up.start()
    url = f"http://127.0.0.1:{api_port}"
    try:
        await up.until_line("bodega is up", timeout=120)
        env = {**os.environ, "BODEGA_API_URL": url, "BODEGA_API_TOKEN": TOKEN}
        async with httpx.AsyncClient(base_url=url, timeout=60,
                                     headers={"authorization": f"Bearer {TOKEN}"}) as http, \
                MachinesClient(url, TOKEN) as machines:
            names = [f"ams-{i}" for i in range(1, workers + 1)]
            yield Jobs(url, http, JobsApi(machines), names, env), up
    finally:
        await up.end()
        await unwire(tmp / "cluster")


until = partial(poll_until, timeout=60.0, every=0.1)
