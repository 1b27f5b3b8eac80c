"""A move's room on the broker's candidates (``broker/machines/moves.py``): the machine's
room counts free on the worker it left and taken on the one it went to from the moment
the move is answered, as a create and a destroy count theirs, not from each worker's next
row; a move that fails gives its target's room back.

The workers are fakes here (what the move asks of them, answered at once): the shell's
accounting is what is tested, beside the real candidates and placer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from bodega.broker.machines.moves import MachineMoves
from bodega.broker.machines.service import Machines
from bodega.broker.metrics import BrokerMetrics
from bodega.broker.placing.placer import Placer, PlacerConfig
from bodega.broker.view.apps import Apps
from bodega.broker.view.candidates import Candidates
from bodega.broker.view.catalog import MemoryCatalog
from bodega.broker.view.workers import Workers
from bodega.model.capacity import Ask, Totals
from bodega.model.errors import Conflict, InsufficientCapacity
from bodega.model.machine import Machine
from bodega.model.machine_config import MachineConfig
from bodega.placement import Policy
from bodega.wire.internal.worker_calls import Reservation
from bodega.wire.public.moves import MoveMachineRequest

MID = "0123456789abcd"
CONFIG = MachineConfig.model_validate({"image": "local/app",
                                       "guest": {"cpus": 1, "memory_mb": 1536}})
ASK = Ask.for_config(CONFIG)


@dataclass
class FakeWorker:
    """A worker as a move sees it: it holds the machine until it is moved away."""

    name: str
    holds: bool = False
    refuses_moves: bool = False
    released: list[str] = field(default_factory=list)

    async def machine(self, machine_id: str, app: str) -> Machine:
        return Machine(id=machine_id, app=app, name="filler", state="started", region="ams",
                       config=CONFIG, worker=self.name)

    async def reserve(self, _app: str, _ask: Ask, _ttl: float) -> Reservation:
        return Reservation(id=f"r-{self.name}", expires_at=0.0, worker=self.name)

    async def release(self, reservation: str) -> None:
        self.released.append(reservation)

    async def send(self, *_args: Any, **_kwargs: Any) -> None:
        if self.refuses_moves:
            raise Conflict("the machine is leased", status="failed_precondition")


Rig = tuple[MachineMoves, Candidates, dict[str, FakeWorker]]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    catalog = MemoryCatalog()
    catalog.put("apps", "a", {"name": "a", "org_slug": "personal"})
    for name in ("w0", "w1"):
        catalog.put("workers", name, {
            "name": name, "region": "ams", "url": f"http://{name}",
            "totals": Totals(cpus=4, memory_mb=2048).row().doc(), "used": {},
            "cordoned": False})
        catalog.set_status(name, "alive")
    candidates = Candidates(catalog)
    candidates.load()
    workers = Workers(catalog, candidates, None)
    fakes = {name: FakeWorker(name) for name in ("w0", "w1")}
    workers.client = lambda name: cast(Any, fakes[name])  # type: ignore[method-assign,assignment]
    machines = Machines(catalog, candidates, workers, Apps(catalog))
    placer = Placer(candidates, workers, Policy(), PlacerConfig(),
                    BrokerMetrics(CollectorRegistry()), "b")
    workers.remember(MID, "w0")
    try:
        yield MachineMoves(machines, placer), candidates, fakes
    finally:
        await workers.aclose()


def used_mb(candidates: Candidates, name: str) -> int:
    candidate = candidates.get(name)
    assert candidate is not None
    return candidate.used.memory_mb


@pytest.mark.parametrize("body", [MoveMachineRequest(worker="w1"),
                                  MoveMachineRequest(region="ams")])
async def test_a_moved_machines_room_is_counted_where_it_went_at_once(
        rig: Rig, body: MoveMachineRequest) -> None:
    moves, candidates, _fakes = rig
    candidates.claimed("w0", ASK)  # its create, placed here, before w0's row said so
    await moves.move("a", MID, body, nonce=None)
    # Without the move's own count, w0 would stay full until its row changed, which it
    # may never do (its create and the move within one row), and w1 free.
    assert (used_mb(candidates, "w0"), used_mb(candidates, "w1")) == (0, 1536)


async def test_a_move_that_fails_gives_the_targets_room_back(rig: Rig) -> None:
    moves, candidates, fakes = rig
    candidates.claimed("w0", ASK)
    fakes["w0"].refuses_moves = True
    with pytest.raises(Conflict):
        await moves.move("a", MID, MoveMachineRequest(worker="w1"), nonce=None)
    assert (used_mb(candidates, "w0"), used_mb(candidates, "w1")) == (1536, 0)
    assert fakes["w1"].released == ["r-w1"]
    # The room given back is room the next move is placed in.
    fakes["w0"].refuses_moves = False
    await moves.move("a", MID, MoveMachineRequest(region="ams"), nonce=None)
    assert (used_mb(candidates, "w0"), used_mb(candidates, "w1")) == (0, 1536)


async def test_a_worker_counted_full_by_a_move_is_not_placed_on(rig: Rig) -> None:
    moves, candidates, _fakes = rig
    candidates.claimed("w1", ASK)  # another machine fills w1 but for 512 MB
    with pytest.raises(InsufficientCapacity):
        await moves.move("a", MID, MoveMachineRequest(region="ams"), nonce=None)
    assert (used_mb(candidates, "w0"), used_mb(candidates, "w1")) == (0, 1536)
