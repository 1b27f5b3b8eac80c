"""Where a create+start's time goes, from the broker's and the worker's own timestamps.

Every clock here is the host's wall clock (one host): the client's own at the call, at
the answer and when the program's byte arrives; the broker's placement record (when it
began placing, ``at``); the worker's record of the machine (``created_at``, the instant
its create transaction read the clock) and its events (``launch created``: the create
operation ended, its steps done; ``start started``: the spawn's step committed), each
stamped by the worker as it committed them (milliseconds). Also the CPU the broker and
the worker spend, and py-spy on both.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import json
import os
import shutil
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

# Each stage: its label, and the two marks it lies between.
STAGES = (
    ("broker: request, auth, decode", "call", "placing"),
    ("broker ranks, calls the worker; worker decodes", "placing", "recorded"),
    ("worker commits the create, both answer", "recorded", "answered"),
    ("create's steps (attach_network, prepare)", "recorded", "created"),
    ("start's steps (starting, spawn)", "created", "started"),
    ("program's first statement, after started", "started", "runs"),
)


def instant(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class Marks:
    """One run's instants (epoch seconds)."""

    call: float
    placing: float
    recorded: float
    answered: float
    created: float
    started: float
    runs: float

    @classmethod
    def of(cls, call: float, answered: float, runs: float, machine: dict[str, Any],
           placement: dict[str, Any]) -> Marks:
        events = {(e["type"], e["status"]): e["timestamp"] / 1000
                  for e in machine.get("events", [])}
        return cls(call=call, placing=instant(placement["at"]),
                   recorded=instant(machine["created_at"]), answered=answered,
                   created=events.get(("launch", "created"), float("nan")),
                   started=events.get(("start", "started"), float("nan")), runs=runs)


def breakdown(marks: list[Marks]) -> list[tuple[str, float]]:
    """Each stage's median (seconds) over the runs, in order."""
    return [(label, statistics.median(getattr(m, end) - getattr(m, begin) for m in marks))
            for label, begin, end in STAGES]


def cpu_seconds(pid: int) -> float:
    """CPU the process (every thread it has run, to the nanosecond: its CPU-time clock)
    and its reaped children (its ip processes, ...; clock ticks) have used. ``/proc``'s
    own figure for the process is in ticks of 10 ms, which over 20 workers and a few
    hundred creates moved a per-create figure by a quarter of a millisecond."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    children = sum(int(f) for f in fields[13:15]) / os.sysconf("SC_CLK_TCK")
    clock = ctypes.c_int()
    if _libc().clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:  # gone, or not ours
        return sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK") + children
    return time.clock_gettime(clock.value) + children


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def component_pids(cluster: Path) -> dict[str, int]:
    parts = json.loads((cluster / "cluster.json").read_text())["components"]
    return {p["role"]: p["pid"] for p in parts if p["role"] in ("broker", "worker")}


async def profiled(cluster: Path, out: Path, roles: tuple[str, ...] = ("broker", "worker")
                   ) -> list[asyncio.subprocess.Process]:
    """py-spy on the cluster's ``roles`` until stopped (SIGINT writes the profile)."""
    out.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (once, before the runs)
    spies = []
    for part in json.loads((cluster / "cluster.json").read_text())["components"]:
        if part["role"] in roles:
            spies.append(await asyncio.create_subprocess_exec(
                shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy",
                "record", "--pid", str(part["pid"]), "--rate", "500",
                "--format", "raw", "--output", str(out / f"{part['role']}.txt"),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL))
    await asyncio.sleep(1)  # attached before the first timed run
    return spies


async def stop_profiles(spies: list[asyncio.subprocess.Process]) -> None:
    """Stop ``profiled``'s py-spy processes; each writes its profile as it ends."""
    for spy in spies:
        spy.send_signal(signal.SIGINT)
        await spy.wait()


# Machines left at rest on the worker before a bench's runs: created, never started, as a
# worker holding apps scaled to zero has them. Each takes an address of the worker's /24.
MOST_AT_REST = 200
REST_CONFIG = {"image": "bench/rest", "init": {"exec": ["sleep", "600"]},
               "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256}}


def room_for(at_rest: int) -> list[str]:
    """``bodega up`` flags giving its worker room for ``at_rest`` machines beside the
    timed ones."""
    return ["--worker-cpus", str(4 + at_rest), "--worker-memory-mb", str(4096 + 256 * at_rest)]


async def leave_at_rest(session: aiohttp.ClientSession, api_url: str, count: int) -> None:
    """Create ``count`` machines at rest in an app of their own (``rest``)."""
    if not count:
        return
    async with session.post(f"{api_url}/v1/apps",
                            json={"app_name": "rest", "org_slug": "personal"}) as response:
        response.raise_for_status()
    for _ in range(count):
        async with session.post(f"{api_url}/v1/apps/rest/machines",
                                json={"config": REST_CONFIG, "skip_launch": True}) as response:
            if response.status != 200:
                raise SystemExit(f"the broker refused a machine at rest: "
                                 f"{await response.text()}")
