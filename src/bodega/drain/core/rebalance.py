"""A rebalance's plan: moves that lower hot hosts and stranded room, scored with the
simulator's own measures. Pure: the facts in, the moves out.

The score is what ``bodega sim`` reports of a fleet, on two pictures of it: the hosts as
they run now, and as they would be with every stopped machine started where it is (a
stopped machine holds no compute, but the proxy starts it on its own host when requests
come: a host holding many is room stranded, hot the moment they start). For each
picture, the hosts above ``HOT`` (``hosts_above_90``) and the spread of utilization
(``cv``), each host's utilization the busier of cpu and memory (``host_utilization``).
Fewer hot hosts first, then less spread:

    score = (hot now + hot if started, cv now + cv if started)      lower is better

Greedy, one move at a time: of every movable machine and every worker of its region
that placement's filters let take it, the move that lowers the score most, while it
lowers it by more than ``MIN_GAIN`` over the count of hosts; never the same machine
twice. Stopped machines move freely (moved stopped); started ones only when asked
(``running``), and only when another healthy machine of their app keeps it served and
over its ``min_machines_running`` while it moves: the drain's rules, with no move that
leaves an app unserved. Machines with a volume stay (a move copies all of its data:
more than a better spread is worth); standbys stay where their create put them (off
their primaries' hosts), and so do machines on cordoned or draining workers (a drain's
to move), which the score leaves out with the hosts that are not alive. A balanced
fleet gets no move.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bodega.drain.core.facts import MOVABLE, STARTED, Fleet, Unit
from bodega.drain.core.plan import Move, Room, app_floor, healthy_counts, request_for
from bodega.placement.filters import refusal
from bodega.sim.measures import coefficient_of_variation, hot_hosts

# The least lowering of the spread a move must bring, shared by the hosts: one machine
# moves the spread of n hosts about 1/n as much as it moves that of two.
MIN_GAIN = 0.02
MOST_MOVES = 20


@dataclass(frozen=True)
class Score:
    hot: int  # hosts above HOT as they run
    hot_if_started: int  # ... with every stopped machine started where it is
    cv: float
    cv_if_started: float

    def key(self) -> tuple[int, float]:
        return (self.hot + self.hot_if_started, self.cv + self.cv_if_started)

    def describe(self) -> str:
        return (f"{self.hot} hot host(s) ({self.hot_if_started} with stopped machines "
                f"started), cv {self.cv:.2f} ({self.cv_if_started:.2f})")


@dataclass(frozen=True)
class Rebalance:
    moves: tuple[Move, ...]
    before: Score
    after: Score


class Picture:
    """Where each machine is as the plan moves them, and the score of that: two rooms, the
    hosts as they run and as they would with their stopped machines started, each kept up
    to date move by move (a score is one pass over the hosts, not over the machines)."""

    def __init__(self, fleet: Fleet) -> None:
        usable = [w for w in fleet.workers if w.status == "alive" and not w.cordoned]
        self.hosts = sorted(w.name for w in usable)
        self.room = Room(usable)
        later = {w.name: w for w in usable}
        for unit in fleet.units:
            host = later.get(unit.worker)
            if host is not None and not unit.started and unit.state in MOVABLE:
                later[unit.worker] = replace(host, used=host.used.plus(
                    host.totals, replace(unit.ask, disk_gb=0)))
        self.later = Room(later.values())

    def score(self) -> Score:
        if not self.hosts:
            return Score(0, 0, 0.0, 0.0)
        now = np.array([[self.room.utilization(h) for h in self.hosts]])
        later = np.array([[self.later.utilization(h) for h in self.hosts]])
        return Score(int(hot_hosts(now)[0]), int(hot_hosts(later)[0]),
                     float(coefficient_of_variation(now)[0]),
                     float(coefficient_of_variation(later)[0]))

    def trial(self, unit: Unit, target: str) -> Score:
        """The score with ``unit`` moved to ``target``, the picture left as it was."""
        saved = dict(self.room.workers), dict(self.later.workers)
        self.apply(unit, target)
        try:
            return self.score()
        finally:
            self.room.workers, self.later.workers = saved

    def apply(self, unit: Unit, target: str) -> None:
        self.room.take(unit, target)
        self.later.take(replace(unit, state=STARTED), target)  # as if it ran, wherever


def movable(unit: Unit, fleet: Fleet, healthy: dict[str, int], running: bool) -> bool:
    if unit.state not in MOVABLE or unit.volume is not None:
        return False
    if not unit.started:
        return True
    held, interrupts = app_floor(unit, fleet, healthy)
    return running and held is None and not interrupts


def plan_rebalance(fleet: Fleet, running: bool = False, most: int = MOST_MOVES) -> Rebalance:
    """The moves that lower the score, best first, at most ``most``."""
    picture = Picture(fleet)
    before = current = picture.score()
    healthy = healthy_counts(fleet.units)
    alive = set(picture.hosts)
    candidates = [u for u in fleet.units
                  if u.worker in alive and movable(u, fleet, healthy, running)]
    moved: set[str] = set()
    moves: list[Move] = []
    while len(moves) < most:
        best: tuple[tuple[int, float], Unit, str, Score] | None = None
        # Machines alike (the same host, size, state and needs) score alike: one of each is
        # tried, so a big fleet costs its kinds of machine, not its machines.
        tried: set[tuple[str, object, bool, bool]] = set()
        for unit in candidates:
            kind = (unit.worker, unit.ask, unit.started, unit.needs_images)
            if unit.id in moved or kind in tried or unit.standby_for:
                continue
            tried.add(kind)
            request = request_for(unit)
            for name in picture.hosts:
                worker = picture.room.workers[name]
                if name == unit.worker or worker.region != unit.region or \
                        refusal(request, worker) is not None:
                    continue
                trial = picture.trial(unit, name)
                if best is None or trial.key() < best[0]:
                    best = (trial.key(), unit, name, trial)
        if best is None or not gains(current, best[3], len(picture.hosts)):
            break
        _, unit, target, after = best
        picture.apply(unit, target)
        moved.add(unit.id)
        moves.append(Move(unit, target, f"{current.describe()} -> {after.describe()}"))
        current = after
    return Rebalance(tuple(moves), before, current)


def gains(before: Score, after: Score, hosts: int) -> bool:
    """Whether ``after`` is worth a move: fewer hot hosts, or as many and less spread (by
    more than ``MIN_GAIN`` shared by the ``hosts``)."""
    hot_before, spread_before = before.key()
    hot_after, spread_after = after.key()
    if hot_after != hot_before:
        return hot_after < hot_before
    return spread_before - spread_after > MIN_GAIN / max(hosts, 1)
