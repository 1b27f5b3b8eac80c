"""The scenarios under a workload: kills, partitions, gossip loss, a slow host.

Each takes the booted cluster and a size (operations per actor), runs its
fault beside the workload, heals, and leaves the checks to ``scenario.settle``.
The ones that need a precise setup rather than a workload are in
``host_faults``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

from .cluster import GOSSIP_PORT, Cluster, Node
from .scenario import Result, create_app, members_alive, settle, under_fault
from .state import Violation
from .workload import drive

REGIONS = ["ams", "syd", "ord"]
ACTORS = 12
KILLS = 6  # one node down at a time, each back with its data before the next


async def restart(c: Cluster, node: Node, result: Result) -> None:
    try:
        await c.start(node)
    except RuntimeError as exc:
        result.violations.append(Violation(invariant="restart", detail=(
            f"{node.name} did not come back with its data: {str(exc)[-300:]}")))


async def _workload(c: Cluster, result: Result, app: str, regions: list[str], operations: int,
                    seed: int, fault: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
                    *, scheduled: bool = False) -> None:
    """Clients under ``fault``. A ``scheduled`` fault runs its own course, and the clients
    keep sending until it is over; otherwise the fault lasts until the clients are done."""
    await create_app(c, app, result)
    apis = [c.api(b) for b in c.brokers]
    over = asyncio.Event() if scheduled else None

    async def faulting(done: asyncio.Event) -> None:
        try:
            await fault(done)
        finally:
            if over is not None:
                over.set()

    try:
        ledger = await under_fault(c, result, drive(
            apis, app, regions, actors=ACTORS, operations=operations, seed=seed, until=over),
            faulting)
    finally:
        for api in apis:
            await api.aclose()
    healed = time.monotonic()
    if not await members_alive(c):
        result.violations.append(Violation(invariant="membership",
                                           detail="not every worker alive again after heal"))
    await settle(c, result, ledger.creates, ledger.expectations(), healed)


async def kill9(c: Cluster, operations: int, seed: int) -> Result:
    """Random workers and brokers SIGKILLed mid-workload, restarted with their data."""
    result = Result("kill -9 workers and brokers")
    rng = random.Random(seed)

    async def killing(done: asyncio.Event) -> None:
        victims = [*c.workers, *c.brokers]
        for _ in range(KILLS):
            await asyncio.sleep(rng.uniform(0.5, 1.5))
            node = rng.choice(victims)
            await c.kill9(node)
            result.faults.append(f"kill -9 {node.name}")
            await asyncio.sleep(rng.uniform(0.5, 1.5))
            await restart(c, node, result)

    await _workload(c, result, f"kill-{seed}", REGIONS, operations, seed, killing,
                    scheduled=True)
    return result


async def partition(c: Cluster, operations: int, seed: int) -> Result:
    """Region syd cut from the rest, healed; then one ams worker cut off and brought back."""
    result = Result("region partition, lone worker cut")
    syd = [n.index for n in c.workers if n.region == "syd"]
    others = [n.index for n in c.nodes if n.index not in syd]

    async def cutting(done: asyncio.Event) -> None:
        await asyncio.sleep(2)
        await c.hosts.partition(syd, others)
        result.faults.append("partition syd|rest 12s")
        await asyncio.sleep(12)
        await c.hosts.heal()
        await asyncio.sleep(3)
        lone = c.workers[1]
        await c.hosts.partition([lone.index], [n.index for n in c.nodes if n != lone])
        result.faults.append(f"cut {lone.name} 8s")
        await asyncio.sleep(8)
        await c.hosts.heal()

    await _workload(c, result, f"part-{seed}", REGIONS, operations, seed, cutting,
                    scheduled=True)
    return result


async def gossip_loss(c: Cluster, operations: int, seed: int, percent: int = 30) -> Result:
    """Every host drops ``percent``% of the gossip datagrams it receives."""
    result = Result(f"{percent}% loss on gossip")

    async def losing(done: asyncio.Event) -> None:
        await c.hosts.lose([n.index for n in c.nodes], percent, GOSSIP_PORT)
        result.faults.append(f"{percent}% udp/{GOSSIP_PORT} loss on {len(c.nodes)} hosts")
        try:
            await done.wait()
        finally:
            await c.hosts.stop_losing()

    await _workload(c, result, f"loss-{seed}", REGIONS, operations, seed, losing)
    return result


async def slow_worker(c: Cluster, operations: int, seed: int, delay_ms: int = 400) -> Result:
    """One ord worker's API answers ``delay_ms`` late on every chunk, each way."""
    result = Result("slow worker API")
    slow = next(n for n in c.workers if n.relay)

    async def slowing(done: asyncio.Event) -> None:
        c.delay_file(slow).write_text(str(delay_ms))
        result.faults.append(f"{slow.name} API +{delay_ms} ms per chunk")
        try:
            await done.wait()
        finally:
            c.delay_file(slow).write_text("0")

    await _workload(c, result, f"slow-{seed}", ["ord", "ams"], operations, seed, slowing)
    return result
