"""Walking a drain's or a rebalance's moves: one machine at a time, each asked of the move
route, a started one waited for until it is healthy on its new worker before the next.

The planners (``core/plan.py``, ``core/rebalance.py``) decide; this is their shell, run
by the CLI as a deploy's steps are (the client drives it, the API moves each machine).
One at a time, in the plan's order, so an app never has more than one machine down for a
move. A move the API refuses (409: leased or moving; 412: no room after all) is reported
and the walk goes on with the others; a started machine that does not come back healthy
stops the walk, since the next move of its app could leave it unserved. After each move
the caller hears its progress: n of N, the machine, from and to, the seconds it took,
and an ETA (the mean so far times what is left).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from bodega.drain.core.facts import HEALTHY_CHECK, STARTED
from bodega.drain.core.plan import Move
from bodega.model.errors import BodegaError
from bodega.model.machine import Machine
from bodega.runtime.waits import within

if TYPE_CHECKING:
    from bodega.wire.public.machines_client import MachinesClient

HEALTHY_WITHIN = 120.0  # seconds a moved started machine has to pass its checks
POLL = 0.5
UNREPORTED = 5.0  # seconds a configured check's first result may take to appear
DOWN = frozenset({"failed", "stopped", "destroyed"})


class Mover(Protocol):
    """The API a walk needs: the move route, and a machine's answer."""

    async def move(self, app: str, machine_id: str, worker: str, reason: str) -> Machine: ...

    async def machine(self, app: str, machine_id: str) -> Machine: ...


@dataclass(frozen=True)
class Progress:
    done: int  # moves finished, this one included
    total: int
    move: Move
    seconds: float
    eta: float  # seconds left, by the mean so far
    error: str | None = None  # why this move did not happen (or did not come back healthy)


@dataclass
class Walk:
    moved: list[Move] = field(default_factory=list)
    failed: list[tuple[Move, str]] = field(default_factory=list)
    stopped: str | None = None  # why the walk stopped before its end
    seconds: float = 0.0


def healthy(machine: Machine) -> bool:
    return machine.state == STARTED and all(c.status == HEALTHY_CHECK
                                            for c in machine.checks or ())


def checks_configured(machine: Machine) -> bool:
    config = machine.config
    return config is not None and (bool(config.checks)
                                   or any(s.checks for s in config.services or ()))


class NotHealthy(Exception):
    """A moved machine came to rest down on its new worker."""


async def until_healthy(mover: Mover, app: str, machine_id: str, first: Machine,
                        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Until the machine runs with every check passing. Checks configured but not reported
    yet are waited for ``UNREPORTED`` seconds (the first probe may be on its way; a machine
    whose checks never report counts once it runs, as a deploy's wait counts it)."""
    machine, unreported = first, UNREPORTED
    while True:
        if machine.state in DOWN:
            raise NotHealthy(f"it is {machine.state} there")
        waiting = checks_configured(machine) and not machine.checks and unreported > 0
        if healthy(machine) and not waiting:
            return
        await sleep(POLL)
        unreported -= POLL
        machine = await mover.machine(app, machine_id)


async def walk(moves: Sequence[Move], mover: Mover, reason: str,
               heard: Callable[[Progress], None] = lambda _: None, *,
               healthy_within: float = HEALTHY_WITHIN,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> Walk:
    """Carry out ``moves`` in order; ``heard`` is told of each."""
    out = Walk()
    began = clock()
    for n, move in enumerate(moves, 1):
        unit = move.unit
        started = clock()
        error: str | None = None
        try:
            machine = await mover.move(unit.app, unit.id, move.target, reason)
            if unit.started:
                await within(until_healthy(mover, unit.app, unit.id, machine, sleep),
                             healthy_within)
        except TimeoutError:
            error = f"not healthy on {move.target} within {healthy_within:g} s"
            out.stopped = f"{unit.label} {error}: stopped before moving more of its app"
        except NotHealthy as exc:
            error = f"not healthy on {move.target}: {exc}"
            out.stopped = f"{unit.label} {error}: stopped before moving more of its app"
        except BodegaError as exc:
            error = str(exc)
        seconds = clock() - started
        if error is None:
            out.moved.append(move)
        else:
            out.failed.append((move, error))
        spent = clock() - began
        heard(Progress(n, len(moves), move, seconds, spent / n * (len(moves) - n), error))
        if out.stopped is not None:
            break
    out.seconds = clock() - began
    return out


class ApiMover:
    """``Mover`` over the Machines API: the move route (``MachinesClient.move``)."""

    def __init__(self, client: MachinesClient) -> None:
        self.client = client

    async def move(self, app: str, machine_id: str, worker: str, reason: str) -> Machine:
        return await self.client.move(app, machine_id, worker=worker, reason=reason)

    async def machine(self, app: str, machine_id: str) -> Machine:
        return await self.client.machine(app, machine_id)
