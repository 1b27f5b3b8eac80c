"""The discrete-event simulation: brokers placing a trace onto hosts through stale views.

    trace ─arrive─▶ broker b (random) ─rank_region over b's view─▶ ask #1 ─yes─▶ host takes it
                                                                     │no          │
                                         b believes what it has free ◀┘ ask #2 ... │
                                                                                   ▼
    every host change ─publish─▶ each broker's view, ``gossip_delay`` later (jittered)

Each broker keeps one ``CandidateTable`` per region, as the real broker
does, ranks with the real ``rank_region`` and walks ``attempts()``; it
counts a create on its own row of the winner at once (the broker's
``claimed``), and on a no it believes the worker's report of what it has
free (the broker's ``refused``). A host's own ledger (``SimHost.admits``)
is the final word, so brokers whose views lag each other race for the same
room exactly as they do over the network. There is no queue: a create that
finds no yes within ``max_attempts`` asks (the broker's deadline) is
rejected. Nothing here sleeps or touches a socket; a run is a pure function
of (trace, fleet, policy, config) except for the measured decision times.
"""

from __future__ import annotations

import heapq
import random
import time
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from bodega.model.capacity import Ask, Usage
from bodega.placement import CandidateTable, PlacementRequest, rank_region
from bodega.sim.fleet import FleetSpec, Placed, SimHost, build_hosts
from bodega.sim.policies import SimPolicy, with_seed
from bodega.sim.trace import Arrival, Trace

# Event kinds, in the order they run when they fall at the same instant.
PUBLISH, DEPART, ARRIVE, SAMPLE = 0, 1, 2, 3


class SimConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    brokers: int = Field(default=3, ge=1)
    gossip_delay: float = Field(default=2.0, ge=0)  # seconds until a change reaches a broker
    jitter: float = Field(default=0.5, ge=0, le=1)  # each delay is drawn in delay * (1 ± jitter)
    max_attempts: int = Field(default=8, ge=1)  # workers asked before the create fails
    sample_every: float = Field(default=300.0, gt=0)  # seconds between utilization samples
    warmup: float = Field(default=0.0, ge=0)  # samples before this are left out of measures
    routing: Literal["random", "round-robin"] = "random"  # which broker gets each create
    seed: int = 1


@dataclass
class Sample:
    time: float
    utilization: npt.NDArray[np.float64]  # per host
    machines: npt.NDArray[np.int64]  # running machines per host: what its death takes down
    unprotected: npt.NDArray[np.int64]  # of those, machines with no standby on another host


@dataclass
class RunResult:
    policy: str
    config: SimConfig
    hosts: list[str]
    creates: int = 0
    placed: int = 0
    rejected: int = 0
    rejected_with_room: int = 0  # rejected while some host in the region had room for it
    refusals: int = 0  # a worker said no to a broker that thought it had room
    standbys: int = 0
    standbys_rejected: int = 0
    decision_seconds: list[float] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)


@dataclass(frozen=True)
class Publication:
    """A host's row as it was at a change, on its way to one broker."""

    broker: int
    host: int
    used: Usage
    version: int


class SimBroker:
    """One broker's view: a table per region, refreshed by publications, adjusted by answers."""

    def __init__(self, hosts: list[SimHost], policy: SimPolicy, seed: int) -> None:
        self.policy = policy
        self.rng = random.Random(seed)
        self.tables: dict[str, CandidateTable] = {}
        for host in hosts:
            self.tables.setdefault(host.region, CandidateTable(host.region)).put(host.candidate())
        self.seen = {host.name: host.version for host in hosts}

    def _row(self, host: SimHost) -> tuple[CandidateTable, Usage]:
        table = self.tables[host.region]
        i = table.index(host.name)
        assert i is not None
        return table, table.candidate(i).used

    def view(self, host: SimHost, used: Usage, version: int) -> None:
        """A publication arrived; an older one arriving late is ignored (last writer wins)."""
        if version > self.seen[host.name]:
            self.seen[host.name] = version
            self.tables[host.region].put(host.candidate(used))

    def claimed(self, host: SimHost, ask: Ask) -> None:
        table, used = self._row(host)
        table.put(host.candidate(used.plus(host.totals, ask)))

    def refused(self, host: SimHost) -> None:
        """The worker said no and what it has free: believe it until its next row."""
        self.tables[host.region].put(host.candidate())


class Simulation:
    def __init__(self, trace: Trace, fleet: FleetSpec, policy: SimPolicy,
                 config: SimConfig) -> None:
        self.trace, self.config = trace, config
        self.hosts = build_hosts(fleet)
        self.by_name = {h.name: i for i, h in enumerate(self.hosts)}
        self.rng = random.Random(config.seed)
        count = 1 if policy.omniscient else config.brokers
        self.delay = 0.0 if policy.omniscient else config.gossip_delay
        self.brokers = [SimBroker(self.hosts, with_seed(policy, config.seed * 1000 + b),
                                  config.seed * 1000 + b) for b in range(count)]
        self.events: list[tuple[float, int, int, int | Publication | None]] = []
        self._seq = 0
        self.machines: dict[int, Placed] = {}
        self.result = RunResult(policy.name, config, [h.name for h in self.hosts])

    def _push(self, at: float, kind: int, payload: int | Publication | None) -> None:
        self._seq += 1
        heapq.heappush(self.events, (at, kind, self._seq, payload))

    def run(self) -> RunResult:
        for i, arrival in enumerate(self.trace.arrivals):
            self._push(arrival.time, ARRIVE, i)
        at = 0.0
        while True:  # from the start to the first sample after the last arrival
            self._push(at, SAMPLE, None)
            if at >= self.trace.end:
                break
            at += self.config.sample_every
        while self.events:
            now, kind, _, payload = heapq.heappop(self.events)
            if isinstance(payload, Publication):
                self.brokers[payload.broker].view(self.hosts[payload.host], payload.used,
                                                  payload.version)
            elif kind == DEPART and payload is not None:
                self._depart(now, payload)
            elif kind == ARRIVE and payload is not None:
                self._arrive(now, self.trace.arrivals[payload])
            elif kind == SAMPLE and now >= self.config.warmup:
                self._sample(now)
        return self.result

    # -- the host side ------------------------------------------------------------------
    def _publish(self, now: float, index: int) -> None:
        host = self.hosts[index]
        for b, broker in enumerate(self.brokers):
            if self.delay == 0:
                broker.view(host, host.used, host.version)
                continue
            spread = self.config.jitter * self.delay
            delay = self.delay + self.rng.uniform(-spread, spread)
            self._push(now + delay, PUBLISH, Publication(b, index, host.used, host.version))

    def _depart(self, now: float, machine: int) -> None:
        placed = self.machines.pop(machine)
        host = self.hosts[placed.host]
        host.give_back(machine, placed.ask)
        if placed.standby is None or placed.standby == placed.host:
            host.unprotected -= 1
        self._count(placed.app, host, -1)
        self._publish(now, placed.host)

    def _count(self, app: str, host: SimHost, delta: int) -> None:
        # The brokers' machine index: each table keeps an app's machines per worker, as the
        # broker's Candidates.count does (here without the view's lag).
        for broker in self.brokers:
            broker.tables[host.region].add_count(app, host.name, delta)

    # -- the broker side ----------------------------------------------------------------
    def _arrive(self, now: float, arrival: Arrival) -> None:
        result = self.result
        result.creates += 1
        if self.config.routing == "round-robin":
            broker = self.brokers[(result.creates - 1) % len(self.brokers)]
        else:
            broker = self.brokers[self.rng.randrange(len(self.brokers))]
        ask = arrival.ask()
        request = PlacementRequest(app=arrival.app, ask=ask, regions=(arrival.region,))
        index = self._place(broker, request)
        if index is None:
            result.rejected += 1
            if any(h.admits(ask) for h in self.hosts if h.region == arrival.region):
                result.rejected_with_room += 1
            return
        result.placed += 1
        machine = result.creates  # unique: one create, at most one machine
        host = self.hosts[index]
        placed = Placed(arrival.app, ask, index)
        self.machines[machine] = placed
        host.take(machine, ask)
        self._count(arrival.app, host, 1)
        self._publish(now, index)
        self._push(now + arrival.lifetime, DEPART, machine)
        if arrival.standby:
            result.standbys += 1
            # A standby is a stopped machine: placed where it could start, holding nothing.
            standby = self._place(broker, replace(request, standby_workers=frozenset({host.name})),
                                  claim=False)
            if standby is None:
                result.standbys_rejected += 1
            placed.standby = standby
            if standby is not None and standby != index:
                host.unprotected -= 1

    def _place(self, broker: SimBroker, request: PlacementRequest,
               claim: bool = True) -> int | None:
        """Rank over the broker's view, then ask workers in order until one says yes."""
        table = broker.tables.get(request.regions[0])
        if table is None:
            return None
        started = time.perf_counter()
        ranking = rank_region(request, table, broker.policy.policy, broker.rng)
        attempts = ranking.attempts()
        spent = time.perf_counter() - started
        try:
            for _ in range(self.config.max_attempts):
                started = time.perf_counter()
                scored = next(attempts, None)
                spent += time.perf_counter() - started
                if scored is None:
                    return None
                index = self.by_name[scored.candidate.name]
                host = self.hosts[index]
                if host.admits(request.ask):
                    if claim:
                        broker.claimed(host, request.ask)
                    return index
                self.result.refusals += 1
                broker.refused(host)
            return None
        finally:
            self.result.decision_seconds.append(spent)

    def _sample(self, now: float) -> None:
        self.result.samples.append(Sample(
            now,
            np.array([h.utilization() for h in self.hosts], dtype=np.float64),
            np.array([len(h.machines) for h in self.hosts], dtype=np.int64),
            np.array([h.unprotected for h in self.hosts], dtype=np.int64)))


def simulate(trace: Trace, fleet: FleetSpec, policy: SimPolicy,
             config: SimConfig | None = None) -> RunResult:
    """Replay ``trace`` on ``fleet`` with ``policy``; deterministic for a given seed."""
    return Simulation(trace, fleet, policy, config or SimConfig()).run()
