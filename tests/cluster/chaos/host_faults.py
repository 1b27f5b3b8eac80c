"""Scenarios on one host: a worker restarted under its machines, a full disk, a lost primary."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from ..fleet_kit import echo_config
from .cluster import Cluster, Node
from .observe import host_namespaces, machine_processes, snapshot
from .scenario import Result, create_app, members_alive, poll, settle
from .scenarios import restart
from .state import CreateOutcome, Expectation, Violation
from .workload import config


def _pids(c: Cluster, machines: set[str]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {m: set() for m in machines}
    for p in machine_processes(host_namespaces(c), machines):
        if p.machine_id in out:
            out[p.machine_id].add(p.pid)
    return out


async def _started(c: Cluster, machines: set[str]) -> bool:
    snap = await asyncio.to_thread(snapshot, c, views=False)
    states = {m.id: m.state for w in snap.workers for m in w.machines}
    return all(states.get(m) == "started" for m in machines)


async def worker_restart(c: Cluster, seed: int) -> Result:
    """kill -9 a worker whose machines run, start it on the same data: same processes."""
    result = Result("worker restarted under its machines")
    app = f"readopt-{seed}"
    await create_app(c, app, result)
    victim = c.workers[2]
    made: set[str] = set()
    refused: list[str] = []
    async with c.internal() as http:
        for _ in range(4):
            r = await http.post(f"{c.worker_url(victim)}/v1/machines",
                                json={"app": app, "config": config(app)})
            result.operations += 1
            if r.status_code == 200:
                made.add(str(r.json()["id"]))
            else:
                refused.append(f"{r.status_code} {r.text[:120]}")
    if not made or not await poll(lambda: _started(c, made), 60):
        result.violations.append(Violation(invariant="desired-state", detail=(
            f"machines {sorted(made)} never started; refused: {refused}")))
        return result
    before = _pids(c, made)
    await c.kill9(victim)
    result.faults.append(f"kill -9 {victim.name} with {len(made)} machines running")
    await asyncio.sleep(2)
    await restart(c, victim, result)
    healed = time.monotonic()
    await members_alive(c)
    after = _pids(c, made)
    for machine in made:
        if after[machine] != before[machine]:
            result.violations.append(Violation(invariant="readopted", detail=(
                f"{machine} ran as {sorted(before[machine])}, now {sorted(after[machine])}")))
    expectations = [Expectation(machine_id=m, states=["started"]) for m in made]
    await settle(c, result, [], expectations, healed)
    return result


FULL_TRIES = 12


def shrink_wal(data_dir: Path) -> None:
    """Checkpoint the worker's WAL files down to nothing, as after a quiet spell, so that
    once the disk is full its next commits need new space (not pages the WAL already has)."""
    for path in (data_dir / "worker.db", data_dir / "registry" / "registry.db"):
        with contextlib.closing(sqlite3.connect(path, timeout=10)) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def largest(directory: Path, count: int = 8) -> str:
    """The ``count`` largest files under ``directory``, with their sizes."""
    sizes = []
    for path in directory.rglob("*"):
        with contextlib.suppress(OSError):  # a file removed meanwhile
            if path.is_file():
                sizes.append((path.stat().st_size, path))
    return ", ".join(f"{p.relative_to(directory)} {n >> 10} KiB"
                     for n, p in sorted(sizes, reverse=True)[:count])


def fill(path: Any) -> int:
    """Write until the filesystem says ENOSPC; the bytes written."""
    written = 0
    chunk = b"\0" * (1 << 20)
    with open(path, "wb") as out:
        while True:
            try:
                out.write(chunk)
                out.flush()
                written += len(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return written


async def disk_full(c: Cluster, seed: int) -> Result:
    """The tmpfs under a worker's data fills: new work is refused clearly, nothing is lost,
    and creates work again once space is freed."""
    result = Result("disk full under a worker")
    app = f"disk-{seed}"
    await create_app(c, app, result)
    worker = next(n for n in c.workers if n.tmpfs)
    creates: list[CreateOutcome] = []
    kept: set[str] = set()
    stopped: set[str] = set()
    async with c.internal() as http:
        async def create(key: str) -> tuple[int, dict[str, Any]]:
            r = await http.post(f"{c.worker_url(worker)}/v1/machines", json={
                "app": app, "config": config(app), "idempotency_key": key})
            result.operations += 1
            body = r.json() if r.headers.get("content-type", "").startswith(
                "application/json") else {}
            return r.status_code, body

        for i in range(2):
            status, body = await create(f"before-{i}")
            if status == 200:
                kept.add(str(body["id"]))
                creates.append(CreateOutcome(key=f"before-{i}", app=app,
                                             machine_id=str(body["id"])))
        await poll(lambda: _started(c, kept), 60)
        accepted = 0
        await asyncio.to_thread(shrink_wal, c.data_dir(worker))
        filler = c.data_dir(worker) / "filler"
        try:
            size = await asyncio.to_thread(fill, filler)
        except OSError as exc:  # full before the filler: say what filled it
            raise AssertionError(f"{worker.name}'s data dir was full before the test filled "
                                 f"it; it holds: {largest(c.data_dir(worker))}") from exc
        result.faults.append(f"{worker.name} data dir full ({size >> 20} MiB filler)")
        # SQLite can commit into WAL pages it already has, so the first creates may fit:
        # keep asking until the worker refuses, and check how it refuses.
        for i in range(FULL_TRIES):
            key = f"full-{i}"
            try:
                status, body = await create(key)
            except Exception as exc:
                result.violations.append(Violation(invariant="disk-full-refusal", detail=(
                    f"create on a full disk got no answer: {exc!r}")))
                break
            if status == 200:
                creates.append(CreateOutcome(key=key, app=app, machine_id=str(body["id"])))
                kept.add(str(body["id"]))
                accepted += 1
            else:
                creates.append(CreateOutcome(key=key, app=app, failed=True))
                if (status >= 500 and status != 507) or "error" not in body:
                    result.violations.append(Violation(invariant="disk-full-refusal", detail=(
                        f"create on a full disk: {status} {body}")))
                else:
                    result.notes.append(f"full disk: {status} {body.get('error')}")
                break
        result.notes.append(f"{accepted} creates accepted on the full disk before a refusal")
        # A change to a machine that runs is refused as clearly, and the machine keeps running.
        victim = sorted(kept)[0] if kept else None
        if victim is not None:
            r = await http.post(f"{c.worker_url(worker)}/v1/machines/{victim}/stop", json={})
            result.operations += 1
            if r.status_code == 200:
                stopped.add(victim)
            elif r.status_code == 500:
                result.violations.append(Violation(invariant="disk-full-refusal", detail=(
                    f"stop on a full disk: 500 {r.text[:200]}")))
            result.notes.append(f"stop on the full disk: {r.status_code}")
        # Through the public API the region still works: placed on the other ord worker,
        # or refused clearly, never a 500.
        async with c.api(c.brokers[0]) as api:
            r = await api.post(f"/v1/apps/{app}/machines", headers={"idempotency-key": "api-0"},
                               json={"region": "ord", "config": config(app)})
            result.operations += 1
        if r.status_code == 200:
            creates.append(CreateOutcome(key="api-0", app=app, machine_id=str(r.json()["id"])))
            kept.add(str(r.json()["id"]))
        elif r.status_code == 500:
            result.violations.append(Violation(invariant="disk-full-refusal", detail=(
                f"public create in ord while {worker.name} is full: 500 {r.text[:200]}")))
        result.notes.append(f"public create in ord while full: {r.status_code}")
        if not c.alive(worker):
            result.violations.append(Violation(invariant="disk-full-refusal",
                                               detail=f"{worker.name} exited on a full disk"))
        filler.unlink()
        healed = time.monotonic()
        if not c.alive(worker):
            await restart(c, worker, result)

        async def works_again() -> bool:
            status, body = await create(f"after-{uuid.uuid4().hex[:6]}")
            if status == 200:
                kept.add(str(body["id"]))
                creates.append(CreateOutcome(key="after", app=app, machine_id=str(body["id"])))
            return status == 200

        if not await poll(works_again, 30, interval=2):
            result.violations.append(Violation(invariant="disk-full-recovery",
                                               detail="no create succeeded once space was freed"))
    await members_alive(c)
    await settle(c, result, creates, [
        Expectation(machine_id=m, states=["stopped" if m in stopped else "started"])
        for m in kept], healed)
    return result


async def proxy_failover(c: Cluster, seed: int) -> Result:
    """The worker of an app's primary dies: the proxy serves from its standby; once the
    worker is back with its primary running, a broker stops the standby again."""
    result = Result("proxy failover to a standby")
    app = f"ha-{seed}"
    await create_app(c, app, result)
    marker = f"chaos-{uuid.uuid4().hex[:8]}"
    service = echo_config(marker, autostart=False)
    async with c.api(c.brokers[0]) as api:
        made = await api.post(f"/v1/apps/{app}/machines",
                              json={"region": "ams", "config": service})
        assert made.status_code == 200, f"primary: {made.status_code} {made.text}"
        primary = made.json()["id"]
        made = await api.post(f"/v1/apps/{app}/machines", json={
            "region": "ams", "skip_launch": True,
            "config": {**service, "standbys": [primary]}})
        assert made.status_code == 200, f"standby: {made.status_code} {made.text}"
        standby = made.json()["id"]
        result.operations += 2
        hosts = {m: (await api.get(f"/v1/apps/{app}/machines/{m}/placement")).json()
                 ["winner"]["worker"] for m in (primary, standby)}
    if hosts[primary] == hosts[standby]:
        result.violations.append(Violation(invariant="standby-apart",
                                           detail=f"primary and standby both on {hosts[primary]}"))
    served: list[int] = []
    async with httpx.AsyncClient(base_url=c.proxy_url(), timeout=10,
                                 headers={"host": f"{app}.localhost"}) as web:
        async def serves(machine: str) -> bool:
            r = await web.get("/")
            served.append(r.status_code)
            return r.status_code == 200 and r.text.split()[0] == machine

        if not await poll(lambda: serves(primary), 60):
            result.violations.append(Violation(invariant="proxy-serves",
                                               detail=f"primary never served: {served[-3:]}"))
            return result
        lost: Node = c.node(hosts[primary])
        await c.kill9(lost)
        result.faults.append(f"kill -9 {lost.name} (primary's worker)")
        t0 = time.monotonic()
        served.clear()
        if await poll(lambda: serves(standby), 90):
            result.notes.append(f"standby served after {time.monotonic() - t0:.1f}s, "
                                f"{len([s for s in served if s != 200])} errors before")
        else:
            result.violations.append(Violation(invariant="proxy-standby", detail=(
                f"standby never served in 90s: last {served[-3:]}")))
    await restart(c, lost, result)
    await members_alive(c)
    # Back with its primary running there: a broker stops the standby again once the
    # worker has stayed alive for the settle time (docs/deploy.md). The heal ends there.
    async with c.api(c.brokers[0]) as api:
        async def rests() -> bool:
            got = await api.get(f"/v1/apps/{app}/machines/{standby}")
            return got.status_code == 200 and got.json()["state"] == "stopped"

        if not await poll(rests, 90):
            result.violations.append(Violation(invariant="standby-gives-back", detail=(
                "the standby still ran 90s after its primary's worker came back")))
    healed = time.monotonic()
    await settle(c, result, [], [Expectation(machine_id=primary, states=["started"]),
                                 Expectation(machine_id=standby, states=["stopped"])], healed)
    return result
