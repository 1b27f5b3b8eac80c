"""One scenario's frame: prepare, run a workload under a fault, heal, settle, check.

The checks run once the cluster is quiet. "Quiet" is reached by bounded
polling: every worker's operations finished and every machine in a state its
client allows (``SETTLE`` seconds at most). Meanwhile every node's registry
view must come to agree with the workers' stores within ``CONVERGE`` seconds
of the heal, the bound this suite states; the time they took is reported.
Capacity is also sampled while the fault is on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx

from . import invariants
from .cluster import Cluster
from .observe import snapshot
from .state import CreateOutcome, Expectation, Snapshot, Violation
from .workload import Ledger

SETTLE = 120.0
CONVERGE = 60.0
QUIET = ("operations", "desired", "processes")


@dataclass
class Result:
    name: str
    operations: int = 0
    faults: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    convergence: float | None = None
    notes: list[str] = field(default_factory=list)
    apps: list[str] = field(default_factory=list)  # destroyed once checked, to free room

    @property
    def ok(self) -> bool:
        return not self.violations


async def poll(check: Callable[[], Awaitable[bool]], timeout: float,
               interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx.HTTPError, OSError):
            if await check():
                return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(interval)


async def members_alive(c: Cluster, timeout: float = 90.0) -> bool:
    """Every broker sees every worker alive: the cluster is whole again."""
    names = {n.name for n in c.workers}

    async def whole() -> bool:
        for broker in c.brokers:
            async with c.api(broker) as api:
                workers = (await api.get("/v1/cluster/workers")).json()
            if {w["name"] for w in workers if w["status"] == "alive"} < names:
                return False
        return True

    return await poll(whole, timeout)


async def create_app(c: Cluster, app: str, result: Result) -> None:
    result.apps.append(app)
    async with c.api(c.brokers[0]) as api:
        response = await api.post("/v1/apps", json={"app_name": app, "org_slug": "personal"})
        assert response.status_code in (200, 201), response.text

    async def everywhere() -> bool:
        for broker in c.brokers:
            async with c.api(broker) as api:
                if (await api.get(f"/v1/apps/{app}")).status_code != 200:
                    return False
        return True

    if not await poll(everywhere, 60):
        raise AssertionError(f"app {app} did not reach every broker")


async def sample_capacity(read: Callable[[], Snapshot], into: list[Violation],
                          stop: asyncio.Event, every: float = 1.0) -> None:
    """While faults are on: a worker over its totals at any sample (``read`` takes one) is a
    violation."""
    seen: set[str] = set()
    while not stop.is_set():
        snap = await asyncio.to_thread(read)
        for v in invariants.capacity(snap):
            if v.detail not in seen:
                seen.add(v.detail)
                into.append(v)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


async def settle(c: Cluster, result: Result, creates: list[CreateOutcome],
                 expectations: list[Expectation], healed_at: float) -> None:
    """Wait (bounded) for quiet and, alongside, for the views to agree with the stores;
    then record everything still wrong. Convergence is timed from ``healed_at``."""
    async def quiet() -> bool:
        snap = await asyncio.to_thread(snapshot, c, creates, expectations, views=False)
        return not invariants.check(snap, QUIET)

    async def converged() -> bool:
        snap = await asyncio.to_thread(snapshot, c, creates, expectations)
        return not invariants.views(snap)

    async def timed() -> None:
        if await poll(converged, SETTLE):
            result.convergence = time.monotonic() - healed_at

    await asyncio.gather(poll(quiet, SETTLE), timed())
    if result.convergence is not None and result.convergence > CONVERGE:
        result.violations.append(Violation(invariant="views-converged", detail=(
            f"views agreed only {result.convergence:.1f}s after the heal (bound {CONVERGE}s)")))
    # Reservations expire on their own (10 s): a leftover one is a leak only after that.
    await poll(no_live_reservations(lambda: snapshot(c, views=False)), 15)
    final = await asyncio.to_thread(snapshot, c, creates, expectations)
    result.violations += invariants.check(final)


def no_live_reservations(read: Callable[[], Snapshot]) -> Callable[[], Awaitable[bool]]:
    """A check for ``poll``: no worker holds a live reservation (``read`` takes a snapshot)."""
    async def check() -> bool:
        snap = await asyncio.to_thread(read)
        return not any(r.live for w in snap.workers for r in w.reservations)
    return check


async def under_fault(c: Cluster, result: Result, workload: Awaitable[Ledger],
                      fault: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> Ledger:
    """Run ``workload`` with ``fault`` alongside (it stops when ``done`` is set) and the
    capacity sampler; the fault must heal what it broke before it returns."""
    done = asyncio.Event()
    sampled: list[Violation] = []
    sampler = asyncio.create_task(sample_capacity(lambda: snapshot(c, views=False), sampled,
                                                  done))
    faulting = asyncio.create_task(fault(done))
    try:
        ledger = await workload
    finally:
        done.set()
        await faulting
        await sampler
    result.violations += sampled
    result.operations += ledger.operations
    result.notes.append("answers " + " ".join(f"{k}:{v}" for k, v in
                                              sorted(ledger.answers.items())))
    return ledger


async def clear(c: Cluster, apps: list[str]) -> bool:
    """Destroy every machine of ``apps`` on every worker (forced), so the next scenario
    starts with room; True once the stores say they are all destroyed."""
    async with c.internal() as http:
        for node in c.workers:
            for app in apps:
                with contextlib.suppress(httpx.HTTPError):
                    listed = (await http.get(f"{c.worker_url(node)}/v1/machines",
                                             params={"app": app})).json()
                    for m in listed:
                        await http.delete(f"{c.worker_url(node)}/v1/machines/{m['id']}",
                                          params={"force": "true"})

    async def gone() -> bool:
        snap = await asyncio.to_thread(snapshot, c, views=False)
        return all(m.state == "destroyed" for w in snap.workers for m in w.machines
                   if m.app in apps)

    return await poll(gone, 60)
