"""A drain's plan: where each machine of the drained workers goes, in what order, and which
cannot go (and why). Pure: the facts in (``facts.Fleet``), the decisions out.

    machines on the drained workers
        │ settling (creating, stopping...)            ──▶ stuck: "wait for it to settle"
        │ started, and its move would take its app
        │   under min_machines_running (no --force)   ──▶ stuck: "under its floor"
        ▼
    target: placement's own filters (alive, not cordoned or draining, images, isolation,
    room) over the workers of its region, then the best fit: fewest machines of its app
    there first (two machines of an app on two hosts keep it served if one goes), then
    the fullest host after it lands (room is left whole for bigger machines); a standby
    keeps off its primaries' hosts. No worker                 ──▶ stuck: each one's refusal
        ▼
    the order: started machines whose app stays served first (biggest first: best fit
    decreasing), then those whose app stops being served for the move (its only started
    machine; ``interrupts``), then stopped ones (they hold no compute, so they take no
    room: planned where they could start, and moved stopped; standbys stay standbys).

A machine that mounts a volume moves with it: the move copies the volume's data to the
target (digest checked) before the machine starts there, and its room counts the volume's
disk. A move is stop-then-start (the same machine, on its new worker), so moving started
machines one at a time, each waited for until it is healthy again, never takes an app
below its count of healthy started machines by more than the one being moved; the plan
holds a move that would take an app under its ``min_machines_running`` even so (the
operator scales it up first, or forces the drain). The runner (``drain/steps.py``) walks
the moves in this order, one at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from bodega.drain.core.facts import MOVABLE, Fleet, Unit
from bodega.model.rows.workers import DRAINING
from bodega.placement.filters import refusal
from bodega.placement.request import Candidate, PlacementRequest
from bodega.sim.fleet import host_utilization

REFUSALS_SHOWN = 4  # workers named in a stuck machine's why


@dataclass(frozen=True)
class Move:
    unit: Unit
    target: str
    why: str  # why this worker: the best fit, and how many were refused
    interrupts: bool = False  # the app's only healthy started machine: unserved while it moves


@dataclass(frozen=True)
class Stuck:
    unit: Unit
    why: str


@dataclass(frozen=True)
class Plan:
    moves: tuple[Move, ...]
    stuck: tuple[Stuck, ...]
    drained: tuple[str, ...]  # the workers emptied


class Room:
    """Each worker's room as the plan fills it: a move's machine counted on its target (a
    started one's compute, any one's volume disk) and given back on its origin."""

    def __init__(self, workers: Iterable[Candidate]) -> None:
        self.workers = {w.name: w for w in workers}

    def take(self, unit: Unit, target: str) -> None:
        worker = self.workers[target]
        used = worker.used.plus(worker.totals, unit.ask, compute=unit.started)
        self.workers[target] = replace(worker, used=used)
        origin = self.workers.get(unit.worker)
        if origin is not None:
            compute = unit.ask if unit.started else replace(unit.ask, cpus=0, memory_mb=0)
            self.workers[unit.worker] = replace(
                origin, used=origin.used.minus(origin.totals, compute))

    def utilization(self, name: str, unit: Unit | None = None) -> float:
        """The worker's utilization (the simulator's measure), with ``unit`` on it."""
        worker = self.workers[name]
        used = worker.used if unit is None else worker.used.plus(worker.totals, unit.ask)
        return host_utilization(worker.totals, used)


def request_for(unit: Unit) -> PlacementRequest:
    return PlacementRequest(app=unit.app, ask=unit.ask, regions=(unit.region,),
                            needs_images=unit.needs_images)


def target_for(unit: Unit, room: Room, colocated: dict[str, dict[str, int]],
               avoid: frozenset[str] = frozenset()) -> tuple[str | None, str]:
    """The best fit for ``unit`` in its region, and why; (None, each refusal) if none."""
    request = request_for(unit)
    feasible: list[Candidate] = []
    refused: list[str] = []
    for worker in sorted(room.workers.values(), key=lambda w: w.name):
        if worker.region != unit.region or worker.name == unit.worker:
            continue
        why = "stands by for a machine there" if worker.name in avoid else \
            refusal(request, worker)
        if why is None:
            feasible.append(worker)
        else:
            refused.append(f"{worker.name}: {why}")
    if not feasible:
        shown = "; ".join(refused[:REFUSALS_SHOWN]) + (
            f"; and {len(refused) - REFUSALS_SHOWN} more" if len(refused) > REFUSALS_SHOWN
            else "")
        return None, (f"no worker in {unit.region} can take {unit.ask.describe()}"
                      + (f" ({shown})" if shown else ""))
    of_app = colocated.get(unit.app, {})
    best = min(feasible, key=lambda w: (of_app.get(w.name, 0),
                                        -room.utilization(w.name, unit), w.name))
    after = room.utilization(best.name, unit)
    others = len(feasible) - 1 + len(refused)
    return best.name, (f"best fit in {unit.region}: {after:.0%} full after"
                       + (f", {of_app[best.name]} of {unit.app} there"
                          if of_app.get(best.name) else "")
                       + (f"; {others} other worker(s) considered" if others else ""))


def app_floor(unit: Unit, fleet: Fleet, healthy: dict[str, int]) -> tuple[str | None, bool]:
    """For moving ``unit``: why it is held (its app would go under its floor), or None; and
    whether its app goes unserved while it moves."""
    if not unit.started:
        return None, False
    others = healthy.get(unit.app, 0) - (1 if unit.healthy else 0)
    keep = fleet.keep.get(unit.app, 0)
    if others < keep:
        return (f"moving it would leave {unit.app} {others} healthy started machine(s) while "
                f"it moves, under its min_machines_running {keep}: scale it up first, or "
                f"drain with --force"), others == 0
    return None, others == 0


def healthy_counts(units: Iterable[Unit]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for unit in units:
        if unit.healthy:
            counts[unit.app] = counts.get(unit.app, 0) + 1
    return counts


def colocation(units: Iterable[Unit]) -> dict[str, dict[str, int]]:
    """app -> worker -> its machines there."""
    out: dict[str, dict[str, int]] = {}
    for unit in units:
        per = out.setdefault(unit.app, {})
        per[unit.worker] = per.get(unit.worker, 0) + 1
    return out


def order_key(unit: Unit, interrupts: bool) -> tuple[bool, bool, int, int, str]:
    return (not unit.started, interrupts, -unit.ask.cpus, -unit.ask.memory_mb, unit.id)


def plan_drain(fleet: Fleet, workers: Iterable[str], force: bool = False) -> Plan:
    """Move every machine off ``workers`` (the drained ones, cordoned for the drain here
    if they are not yet: a dry run plans as the drain will)."""
    drained = tuple(sorted(set(workers)))
    room = Room(replace(w, cordoned=True, cordon_reason=DRAINING) if w.name in drained
                else w for w in fleet.workers)
    healthy = healthy_counts(fleet.units)
    colocated = colocation(fleet.units)
    leaving = [u for u in fleet.units if u.worker in drained]
    stuck: list[Stuck] = []
    ready: list[tuple[Unit, bool]] = []
    for unit in leaving:
        if unit.state not in MOVABLE:
            stuck.append(Stuck(unit, f"it is {unit.state}: wait for it to settle, then drain "
                                     "again"))
            continue
        held, interrupts = app_floor(unit, fleet, healthy)
        if held is not None and not force:
            stuck.append(Stuck(unit, held))
            continue
        ready.append((unit, interrupts))
    ready.sort(key=lambda pair: order_key(*pair))
    where = {u.id: u.worker for u in fleet.units}
    moves: list[Move] = []
    for unit, interrupts in ready:
        avoid = frozenset(where[p] for p in unit.standby_for if p in where)
        target, why = target_for(unit, room, colocated, avoid)
        if target is None:
            stuck.append(Stuck(unit, why))
            continue
        room.take(unit, target)
        where[unit.id] = target
        per = colocated.setdefault(unit.app, {})
        per[target] = per.get(target, 0) + 1
        per[unit.worker] = per.get(unit.worker, 1) - 1
        moves.append(Move(unit, target, why, interrupts))
    return Plan(tuple(moves), tuple(stuck), drained)

