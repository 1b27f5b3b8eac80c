"""The Redis baselines of bench/jobs/queues.py: a plain BLPOP pool and a reliable BLMOVE pool.

A pool is one ``redis-server`` (Debian's, no persistence: a queue's usual setup) and
``workers`` worker processes of ``slots`` threads each, every thread taking one job at a
time and running the job's command as a process of its own; all of it in the pool's
cpuacct cgroup. A job is ``"<batch> <task> <seconds>"`` pushed to the ``jobs`` list.

- **blpop**: ``BLPOP jobs`` then run it. A worker killed mid-job loses the job: it left
  the list and nothing remembers it.
- **blmove**: the reliable-queue pattern: ``BLMOVE jobs processing:<worker>:<slot>``,
  run, ``LREM`` it; each worker refreshes ``alive:<worker>`` (a key with a TTL) while it
  lives, and a reaper process moves the jobs of every processing list whose worker's key
  expired back to the head of ``jobs``.

``python -m bench.jobs.redis_pool worker|reaper ...`` are the pool's processes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

from bench.jobs.marks import CpuAccount, command

TTL = 10.0  # seconds a worker's heartbeat lives by default: bodega's lease in the bench
QUEUE = "jobs"
HERE = Path(__file__).resolve().parent


def text(value: bytes | str) -> str:
    """A reply as text (the client decodes; its types allow bytes)."""
    return value.decode() if isinstance(value, bytes) else value


def run_job(item: str, root: Path) -> None:
    batch, task, seconds = item.split()
    env = {**os.environ, "BODEGA_JOB_NAME": batch, "BODEGA_TASK": task}
    subprocess.run(command(root / batch, float(seconds)), env=env, check=False)


def slot(port: int, mode: str, worker: str, index: int, root: Path) -> None:
    # A block of a second at a time: the client's read timeout never cuts a wait short.
    client = redis.Redis(port=port, decode_responses=True, socket_timeout=30)
    mine = f"processing:{worker}:{index}"
    while True:
        if mode == "blpop":
            popped = client.blpop([QUEUE], timeout=1)
            if popped is not None:
                run_job(text(popped[1]), root)
        else:
            item = client.blmove(QUEUE, mine, 1, "LEFT", "RIGHT")
            if item is not None:
                run_job(text(item), root)
                client.lrem(mine, 1, text(item))


def worker(port: int, mode: str, name: str, slots: int, root: Path, ttl: float) -> None:
    name = f"{name}-{os.getpid()}"  # a worker started again is another: the reaper sees
    client = redis.Redis(port=port)  # the old one's key expire and requeues what it held
    for index in range(slots):
        threading.Thread(target=slot, args=(port, mode, name, index, root), daemon=True).start()
    while True:  # the heartbeat (blmove's reaper reads it; blpop has none to read)
        if mode == "blmove":
            client.set(f"alive:{name}", 1, px=int(ttl * 1000))
            client.sadd("workers", name)
        time.sleep(ttl / 10)


def reaper(port: int) -> None:
    client = redis.Redis(port=port, decode_responses=True)
    while True:
        for name in map(text, client.smembers("workers")):
            if client.exists(f"alive:{name}"):
                continue
            for key in client.scan_iter(f"processing:{name}:*"):
                while client.lmove(key, QUEUE, "RIGHT", "LEFT") is not None:
                    pass
        time.sleep(0.2)


class RedisPool:
    """One pool: its server, workers and (blmove) reaper, started and stopped by the bench."""

    def __init__(self, mode: str, root: Path, port: int, workers: int, slots: int,
                 ttl: float = TTL) -> None:
        self.name, self.root, self.port, self.ttl = mode, root, port, ttl
        self.workers, self.slots_each = workers, slots
        self.slots = workers * slots
        self.cpu = CpuAccount(f"bodega-bench-jobs-{os.getpid()}-{mode}")
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        self.client: redis.asyncio.Redis | None = None

    async def _spawn(self, key: str, *argv: str) -> None:
        self.processes[key] = await asyncio.create_subprocess_exec(
            *self.cpu.wrap(list(argv)), start_new_session=True,
            stdout=asyncio.subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(HERE.parents[1])})

    async def _spawn_worker(self, name: str) -> None:
        await self._spawn(name, sys.executable, "-m", "bench.jobs.redis_pool", "worker",
                          "--port", str(self.port), "--mode", self.name, "--name", name,
                          "--slots", str(self.slots_each), "--root", str(self.root),
                          "--ttl", str(self.ttl))

    async def start(self) -> None:
        await self._spawn("server", "redis-server", "--port", str(self.port), "--bind",
                          "127.0.0.1", "--save", "", "--appendonly", "no")
        self.client = redis.asyncio.Redis(port=self.port, decode_responses=True)
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(redis.ConnectionError):
                if await self.client.ping():
                    break
            if time.monotonic() > deadline:
                raise SystemExit(f"redis-server did not answer on port {self.port}")
            await asyncio.sleep(0.05)
        for i in range(self.workers):
            await self._spawn_worker(f"w{i}")
        if self.name == "blmove":
            await self._spawn("reaper", sys.executable, "-m", "bench.jobs.redis_pool", "reaper",
                              "--port", str(self.port))

    async def submit(self, batch: str, count: int, seconds: float) -> float:
        assert self.client is not None
        began = time.time()
        items = [f"{batch} {i} {seconds:g}" for i in range(count)]
        for first in range(0, count, 1000):
            await self.client.rpush(QUEUE, *items[first:first + 1000])
        return began

    async def submit_each(self, batches: list[str], seconds: float) -> float:
        """Each batch a job of one task, pushed in pipelined RPUSHes of 1,000."""
        assert self.client is not None
        began = time.time()
        items = [f"{batch} 0 {seconds:g}" for batch in batches]
        for first in range(0, len(items), 1000):
            await self.client.rpush(QUEUE, *items[first:first + 1000])
        return began

    async def victim_tasks(self, batch: str) -> tuple[str, set[int]]:
        """A worker (w0) and the tasks of ``batch`` its programs run now."""
        return "w0", tasks_in_group(self.processes["w0"].pid, batch)

    async def kill(self, worker: str, batch: str = "", tasks: set[int] | None = None) -> None:
        """kill -9 of the worker and the programs it runs (its process group), then started
        again at once, as a supervisor would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.processes[worker].pid, signal.SIGKILL)
        await self.processes[worker].wait()
        await self._spawn_worker(worker)

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        self.cpu.remove()


def tasks_in_group(pgid: int, batch: str) -> set[int]:
    """The tasks of ``batch`` whose programs run in process group ``pgid`` (a worker's)."""
    running = set()
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError, ValueError):
            if not entry.isdigit() or os.getpgid(int(entry)) != pgid:
                continue
            env = dict(part.split(b"=", 1) for part in
                       Path(f"/proc/{entry}/environ").read_bytes().split(b"\0") if b"=" in part)
            if env.get(b"BODEGA_JOB_NAME") == batch.encode():
                running.add(int(env[b"BODEGA_TASK"]))
    return running


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a process of a Redis pool")
    parser.add_argument("role", choices=["worker", "reaper"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=["blpop", "blmove"], default="blpop")
    parser.add_argument("--name", default="w0")
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--ttl", type=float, default=TTL)
    args = parser.parse_args()
    if args.role == "worker":
        worker(args.port, args.mode, args.name, args.slots, args.root, args.ttl)
    else:
        reaper(args.port)
