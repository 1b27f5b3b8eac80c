"""Hosts that die during a run: what is lost, which standbys take over, what is created again.

    host dies ──▶ its machines are lost; standbys resting there are gone
        │ detect_seconds (membership: suspect, then dead)
        ▼
    every broker sees it dead (a gossip delay later)
        ├─ a lost machine with a standby on a live host: a broker starts the standby
        │  (a gossip delay later); it must fit there, or it fails
        └─ the rest (and failed standbys): created again, ``recreate_after`` later,
           through a broker like any create (the app's deploy restoring its count)
    the host comes back empty (no machines, no images), ``duration`` after its death

As in bodega, nothing is rescheduled by the broker behind the user's back
but standbys; the re-create stands for the app's own tooling noticing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from bodega.model.capacity import Ask
from bodega.sim.events import DETECT, RECREATE, TAKEOVER, UP
from bodega.sim.fleet import Placed, SimHost
from bodega.sim.results import RunResult, SimConfig
from bodega.sim.trace import Outage


class Engine(Protocol):
    """What a death needs of the simulation it happens in (``engine.Simulation``)."""

    config: SimConfig
    hosts: list[SimHost]
    by_name: dict[str, int]
    machines: dict[int, Placed]
    standbys_on: dict[int, set[int]]
    result: RunResult

    def push(self, at: float, kind: int, payload: Any) -> None: ...
    def publish(self, now: float, index: int) -> None: ...
    def gossip(self) -> float: ...
    def count(self, app: str, host: SimHost, delta: int) -> None: ...
    def create(self, now: float, app: str, region: str, ask: Ask, lifetime: float,
               standby: bool) -> bool: ...


@dataclass(frozen=True)
class Recreate:
    """A lost machine, created again: what it was, and when it would have ended."""

    app: str
    region: str
    ask: Ask
    end: float


class Deaths:
    def __init__(self, sim: Engine) -> None:
        self.sim = sim
        self.outages: list[Outage] = []
        self.orphans: dict[int, list[tuple[int, Placed]]] = {}  # dead host -> machines lost
        self.pending: dict[int, Placed] = {}  # machine -> its standby, about to be started

    def down(self, now: float, outage: int) -> None:
        sim = self.sim
        what = self.outages[outage]
        index = sim.by_name[what.host]
        host = sim.hosts[index]
        if not host.alive:
            return  # already down: overlapping outages are one
        sim.result.host_deaths += 1
        for machine in sim.standbys_on.pop(index, set()):  # standbys resting here are gone
            placed = sim.machines.get(machine)
            if placed is not None and placed.standby == index:
                placed.standby = None
                if placed.host != index:
                    sim.hosts[placed.host].unprotected += 1
        orphans = self.orphans.setdefault(index, [])
        for machine in sorted(host.die()):
            placed = sim.machines.pop(machine)
            sim.result.machines_lost += 1
            sim.count(placed.app, host, -1)
            orphans.append((machine, placed))
        detect = sim.config.detect_seconds
        sim.push(now + detect, DETECT, index)
        sim.push(now + max(what.duration, detect), UP, index)

    def detect(self, now: float, index: int) -> None:
        """Membership says the host is dead: brokers stop asking it, standbys start."""
        sim = self.sim
        if sim.hosts[index].alive:
            return
        sim.publish(now, index)
        for machine, placed in self.orphans.pop(index, []):
            if placed.end <= now:
                continue  # it would have ended by now anyway
            if placed.standby is not None:
                self.pending[machine] = placed
                sim.push(now + sim.gossip(), TAKEOVER, machine)
            else:
                self._again(now, placed)

    def takeover(self, now: float, machine: int) -> None:
        """A broker starts the standby: the standby's worker says yes if it has room."""
        sim = self.sim
        placed = self.pending.pop(machine)
        standby = placed.standby
        assert standby is not None
        sim.standbys_on.get(standby, set()).discard(machine)
        placed.standby = None
        host = sim.hosts[standby]
        if placed.end <= now:
            return
        if not host.admits(placed.ask):
            sim.result.takeovers_failed += 1
            self._again(now, placed)
            return
        sim.result.takeovers += 1
        placed.host = standby
        sim.machines[machine] = placed  # its departure is still on the calendar
        host.take(machine, placed.ask)
        sim.count(placed.app, host, 1)
        sim.publish(now, standby)

    def _again(self, now: float, placed: Placed) -> None:
        region = self.sim.hosts[placed.host].region
        self.sim.push(now + self.sim.config.recreate_after, RECREATE,
                      Recreate(placed.app, region, placed.ask, placed.end))

    def recreate(self, now: float, lost: Recreate) -> None:
        if lost.end <= now:
            return
        if self.sim.create(now, lost.app, lost.region, lost.ask, lost.end - now, False):
            self.sim.result.recreated += 1
        else:
            self.sim.result.recreates_rejected += 1

    def up(self, now: float, index: int) -> None:
        host = self.sim.hosts[index]
        if host.alive:
            return
        host.revive()
        self.sim.publish(now, index)
