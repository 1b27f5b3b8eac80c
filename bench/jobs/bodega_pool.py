"""bodega's side of bench/jobs/queues.py: a real ``bodega up`` whose workers take jobs by late
binding.

One region of ``workers`` workers, each with room for ``slots`` tasks of the default
shape (shared-cpu-1x, 256 MB: its memory is ``slots`` x 256 MB), its own data dir, free
ports and a machine range of its own; the whole ``bodega up`` (broker, registry, workers,
proxy, and every task's program) runs in the pool's cpuacct cgroup. A batch is one submit
of ``count`` tasks to the ``bodega`` pool, each task a machine running the shared command.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import free_port, unwire

from bench.jobs.marks import CpuAccount, command, programs_of
from bench.jobs.redis_pool import TTL
from bodega.model.errors import NotFound, TooManyRequests, Unavailable
from bodega.wire.public.jobs.api import SubmitBody
from bodega.wire.public.jobs.direct import DirectSubmits
from bodega.wire.transport.json_client import JsonClient

TOKEN = "bench-jobs-token"
APP = "bench"
MACHINE_MB = 256


class BodegaPool:
    def __init__(self, root: Path, workers: int, slots: int, lease: float = TTL, *,
                 name: str = "bodega", src: Path | None = None, via: str = "door") -> None:
        """``src``: run bodega from that source tree (another commit's ``src``, checked
        out with ``git worktree``) instead of this one, to measure a change side by side."""
        self.name, self.src = name, src
        self.via = via  # a one-task job's submit: at its home's jobs door, or a broker's
        self.root, self.workers, self.slots_each, self.lease = root, workers, slots, lease
        self.slots = workers * slots
        self.data = root / "cluster"
        self.cpu = CpuAccount(f"bodega-bench-jobs-{os.getpid()}-{name}")
        self.process: asyncio.subprocess.Process | None = None
        self.http: httpx.AsyncClient | None = None
        self.submits: aiohttp.ClientSession | None = None  # the measured path: see ``submit``
        self.direct: DirectSubmits | None = None
        self.output: list[str] = []

    async def start(self) -> None:
        api, proxy = free_port(), free_port()
        cidr = machine_cidr(60, 100)  # held while this process lives (tests/cidr_kit.py)
        self.process = await asyncio.create_subprocess_exec(
            *self.cpu.wrap([
                sys.executable, "-m", "bodega", "up", "--data-dir", str(self.data),
                "--regions", "ams", "--workers-per-region", str(self.workers),
                "--worker-cpus", str(self.slots_each),
                "--worker-memory-mb", str(self.slots_each * MACHINE_MB),
                "--api-port", str(api), "--proxy-port", str(proxy), "--proxy-tls-port", "0",
                "--machine-cidr", cidr,
                "--token", TOKEN, "--registry-port", "0", "--log-level", "warning"]),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
            env={**os.environ, "BODEGA_CONFIG": str(self.root / "config.toml"),
                 **({"PYTHONPATH": str(self.src)} if self.src is not None else {})})
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), 180)
            if not line:
                raise SystemExit("bodega up exited:\n" + "\n".join(self.output[-30:]))
            self.output.append(line.decode(errors="replace").rstrip())
            if b"bodega is up" in line:
                break
        asyncio.get_running_loop().create_task(self._drain())
        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{api}", timeout=120,
                                      headers={"authorization": f"Bearer {TOKEN}"})
        self.submits = aiohttp.ClientSession(
            base_url=f"http://127.0.0.1:{api}", timeout=aiohttp.ClientTimeout(total=120),
            headers={"authorization": f"Bearer {TOKEN}"})
        if self.via == "door":
            self.direct = DirectSubmits(JsonClient(f"http://127.0.0.1:{api}", TOKEN,
                                                   timeout=120), app=APP)
        answer = await self.http.post("/v1/apps", json={"app_name": APP,
                                                        "org_slug": "personal"})
        if answer.status_code not in (200, 201):
            raise SystemExit(f"could not create the app: {answer.text}")
        if self.direct is not None:
            try:
                await self.direct.renew()
            except NotFound:  # a tree from before the jobs doors (--before-src): its broker
                self.direct = None

    async def _drain(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.output.append(line.decode(errors="replace").rstrip())

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None,
                   **params: str) -> httpx.Response:
        assert self.http is not None
        for _ in range(600):  # a 429 or a 503 (a home restarting) says when to come back
            answer = await self.http.request(method, path, json=body,
                                             params={"app": APP, **params})
            if answer.status_code not in (429, 503):
                return answer
            await asyncio.sleep(float(answer.headers.get("retry-after", "0.5")))
        raise SystemExit(f"{method} {path}: still {answer.status_code}")

    async def submit(self, batch: str, count: int, seconds: float, pool: str = "bodega") -> float:
        """One submit on a keep-alive connection, answered 200; when it was sent.

        aiohttp, not httpx: a request through httpx costs this client about 0.7 ms more of
        CPU (a GET of an app, 1.06 ms against 0.37 ms here), which the one-by-one phase
        would count as bodega's; the Redis pools' client is redis-py's, as lean."""
        assert self.submits is not None
        body = {"name": batch, "count": count, "pool": pool, "max_attempts": 5,
                "backoff": 0.2, "lease_seconds": self.lease,
                "command": command(self.root / batch, seconds)}
        if count == 1 and self.direct is not None:
            return await self._submit_direct(SubmitBody.model_validate(body))
        began = time.time()
        for _ in range(600):  # a 429 or a 503 (a home restarting) says when to come back
            async with self.submits.post("/sched/submit", params={"app": APP},
                                         json=body) as answer:
                text = await answer.text()
                if answer.status == 200:
                    return began
                if answer.status not in (429, 503):
                    raise SystemExit(f"submit of {batch} refused: {text}")
                await asyncio.sleep(float(answer.headers.get("retry-after", "0.5")))
        raise SystemExit(f"submit of {batch}: still refused")

    async def _submit_direct(self, body: SubmitBody) -> float:
        """One submit at the job's home's jobs door (``DirectSubmits``); when it was sent."""
        assert self.direct is not None
        began = time.time()
        for _ in range(600):
            try:
                await self.direct.submit(body)
                return began
            except (TooManyRequests, Unavailable) as exc:
                await asyncio.sleep(exc.retry_after or 0.5)
        raise SystemExit(f"submit of {body.name}: still refused")

    async def submit_each(self, batches: list[str], seconds: float) -> float:
        """Each batch a one-task job of its own, all in one submit of a JSON list."""
        assert self.http is not None
        began = time.time()
        answer = await self.http.post("/sched/submit", params={"app": APP}, json=[
            {"name": batch, "pool": "bodega", "max_attempts": 5, "backoff": 0.2,
             "lease_seconds": self.lease, "command": command(self.root / batch, seconds)}
            for batch in batches])
        refused = [item for item in answer.json() if "error" in item] \
            if answer.status_code == 200 else [answer.text]
        if refused:
            raise SystemExit(f"a list submit refused {len(refused)}: {refused[:3]}")
        return began

    async def status(self, batch: str) -> dict[str, Any]:
        answer = await self.call("GET", f"/sched/status/{batch}")
        answer.raise_for_status()
        found: dict[str, Any] = answer.json()
        return found

    async def victim_tasks(self, batch: str) -> tuple[str, set[int]]:
        """A worker that is not the batch's home, and the tasks of ``batch`` it runs now."""
        job = await self.status(batch)
        running: dict[str, set[int]] = {}
        for task in job.get("tasks") or []:
            if task["state"] == "running" and task.get("worker"):
                running.setdefault(task["worker"], set()).add(task["index"])
        others = [w for w in running if w != job.get("home")] or list(running)
        if not others:
            return "", set()
        victim = max(others, key=lambda w: len(running[w]))
        return victim, running[victim]

    def process_seconds(self) -> dict[str, float]:
        """CPU seconds (user and system) each component of the cluster (its workers, broker,
        registry agent...) used so far, by name; the jobs' programs, its children, left out."""
        listed = json.loads((self.data / "cluster.json").read_text())["components"]
        tick = os.sysconf("SC_CLK_TCK")
        used: dict[str, float] = {}
        for component in listed:
            with contextlib.suppress(OSError, ValueError, IndexError, KeyError):
                stat = Path(f"/proc/{component['pid']}/stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()  # utime and stime: fields 14 and 15
                used[str(component["name"])] = (int(fields[11]) + int(fields[12])) / tick
        return used

    def pid_of(self, component: str) -> int:
        listed = json.loads((self.data / "cluster.json").read_text())["components"]
        return int(next(c["pid"] for c in listed if c["name"] == component))

    async def kill(self, worker: str, batch: str = "", tasks: set[int] | None = None) -> None:
        """kill -9 of the worker daemon and of the programs of its running tasks (as when its
        host dies); ``bodega up`` starts the worker again, as it does."""
        os.kill(self.pid_of(worker), signal.SIGKILL)
        for pid in programs_of(batch, tasks or set()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    async def claims(self, jobs: int, claimers: int, wait: float) -> tuple[int, int]:
        """Claim mode as the article's workers do it: ``jobs`` one-task jobs of pool ``bench``,
        ``claimers`` external workers each polling the list (its own random order), waiting up
        to ``wait`` s at random, claiming the first job listed, and on a 409 polling again;
        each releases what it won at once. (claims won, 409s)."""
        tag = f"cl{int(wait * 1000)}-{random.randrange(10**6)}"
        for i in range(jobs):
            await self.submit(f"{tag}-{i}", 1, 0, pool="bench")
        won, conflicts = [0], [0]

        async def claimer(me: str) -> None:
            while won[0] < jobs:
                listed = (await self.call("GET", "/sched/jobs", pool="bench")).json()
                mine = [j["name"] for j in listed if j["name"].startswith(tag)]
                if not mine:
                    await asyncio.sleep(0.05)
                    continue
                if wait:
                    await asyncio.sleep(random.uniform(0, wait))
                answer = await self.call("POST", f"/sched/claim/{mine[0]}", {"worker": me})
                if answer.status_code == 409:
                    conflicts[0] += 1
                    continue
                answer.raise_for_status()
                won[0] += 1
                release = await self.call("POST", f"/sched/release/{mine[0]}", {
                    "worker": me, "task": answer.json()["task"], "exit_code": 0})
                release.raise_for_status()

        await asyncio.wait_for(asyncio.gather(*(claimer(f"ext-{i}")
                                                for i in range(claimers))), 600)
        return won[0], conflicts[0]

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.aclose()
        if self.submits is not None:
            await self.submits.close()
        if self.direct is not None:
            await self.direct.aclose()
            await self.direct.broker.aclose()
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.process.wait(), 120)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        await unwire(self.data)
        self.cpu.remove()
