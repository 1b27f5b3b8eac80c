"""The discrete-event simulation: brokers placing a trace onto hosts through stale views.

    trace ─arrive─▶ broker b (random) ─rank_region over b's view─▶ ask #1 ─yes─▶ host takes it
                                                                     │no          │ create: start
                                         b believes what it has free ◀┘ ask #2 ... │ (+ pull)
                                                                                   ▼
    every host change ─publish─▶ each broker's view, ``gossip_delay`` later (jittered)
    a host dies ─▶ its machines are lost ─detected─▶ standbys start, or the rest are
                   created again (``deaths``); it comes back empty

Each broker (``views.SimBroker``) ranks with the real ``rank_region`` over
its own tables and walks ``attempts()``. A host's own ledger
(``SimHost.admits``) is the final word, so brokers whose views lag each
other race for the same room exactly as they do over the network; a dead
host the broker still believes alive does not answer (``unreachable``).
There is no queue: a create that finds no yes within ``max_attempts`` asks
(the broker's deadline) is rejected. A create takes time: ``start_seconds``,
plus ``pull_seconds`` on a host without the app's image; the machine holds
its room from the yes and runs its lifetime after that. Nothing here sleeps
or touches a socket; a run is a pure function of (trace, fleet, policy,
config) except for the measured decision times.
"""

from __future__ import annotations

import heapq
import random
import time
from dataclasses import replace

import numpy as np

from bodega.model.capacity import Ask
from bodega.placement import PlacementRequest, rank_region
from bodega.sim.deaths import Deaths, Recreate
from bodega.sim.events import (
    ARRIVE,
    DEPART,
    DETECT,
    DOWN,
    PUBLISH,
    SAMPLE,
    TAKEOVER,
    UP,
)
from bodega.sim.fleet import FleetSpec, Placed, SimHost, build_hosts
from bodega.sim.policies import SimPolicy, with_seed
from bodega.sim.results import RunResult as RunResult
from bodega.sim.results import Sample as Sample
from bodega.sim.results import SimConfig as SimConfig
from bodega.sim.trace import Trace
from bodega.sim.views import Publication, SimBroker

Payload = int | Publication | Recreate | None


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
        self.events: list[tuple[float, int, int, Payload]] = []
        self._seq = 0
        self.machines: dict[int, Placed] = {}
        self.standbys_on: dict[int, set[int]] = {}  # host -> machines whose standby is there
        self.result = RunResult(policy.name, config, [h.name for h in self.hosts])
        self.deaths = Deaths(self)

    def push(self, at: float, kind: int, payload: Payload) -> None:
        self._seq += 1
        heapq.heappush(self.events, (at, kind, self._seq, payload))

    def run(self) -> RunResult:
        for i, arrival in enumerate(self.trace.arrivals):
            self.push(arrival.time, ARRIVE, i)
        for outage in self.trace.outages:
            if outage.host not in self.by_name:
                raise ValueError(f"the trace's outage names host {outage.host!r}, which the "
                                 "fleet does not have")
            self.push(outage.time, DOWN, len(self.deaths.outages))
            self.deaths.outages.append(outage)
        at = 0.0
        end = max([self.trace.end, *(o.time for o in self.trace.outages)])
        while True:  # from the start to the first sample after the last arrival or death
            self.push(at, SAMPLE, None)
            if at >= end:
                break
            at += self.config.sample_every
        while self.events:
            now, kind, _, payload = heapq.heappop(self.events)
            self._dispatch(now, kind, payload)
        return self.result

    def _dispatch(self, now: float, kind: int, payload: Payload) -> None:
        if isinstance(payload, Publication):
            self.brokers[payload.broker].view(self.hosts[payload.host], payload.used,
                                              payload.version, payload.status, payload.images)
        elif isinstance(payload, Recreate):
            self.deaths.recreate(now, payload)
        elif kind == SAMPLE:
            if now >= self.config.warmup:
                self._sample(now)
        elif payload is None:
            return
        elif kind == DEPART:
            self._depart(now, payload)
        elif kind == ARRIVE:
            arrival = self.trace.arrivals[payload]
            self.create(now, arrival.app, arrival.region, arrival.ask(), arrival.lifetime,
                        arrival.standby)
        elif kind == DOWN:
            self.deaths.down(now, payload)
        elif kind == DETECT:
            self.deaths.detect(now, payload)
        elif kind == UP:
            self.deaths.up(now, payload)
        elif kind == TAKEOVER:
            self.deaths.takeover(now, payload)

    # -- the host side ------------------------------------------------------------------
    def publish(self, now: float, index: int) -> None:
        host = self.hosts[index]
        status = "alive" if host.alive else "dead"
        for b, broker in enumerate(self.brokers):
            if self.delay == 0:
                broker.view(host, host.used, host.version, status, host.images)
                continue
            self.push(now + self.gossip(),
                      PUBLISH, Publication(b, index, host.used, host.version, status,
                                           host.images))

    def gossip(self) -> float:
        """One jittered gossip delay."""
        spread = self.config.jitter * self.delay
        return self.delay + self.rng.uniform(-spread, spread) if self.delay else 0.0

    def _depart(self, now: float, machine: int) -> None:
        placed = self.machines.pop(machine, None)
        if placed is None:
            return  # lost with its host
        host = self.hosts[placed.host]
        host.give_back(machine, placed.ask)
        if placed.standby is None or placed.standby == placed.host:
            host.unprotected -= 1
        if placed.standby is not None:
            self.standbys_on.get(placed.standby, set()).discard(machine)
        self.count(placed.app, host, -1)
        self.publish(now, placed.host)

    def count(self, app: str, host: SimHost, delta: int) -> None:
        # The brokers' machine index: each table keeps an app's machines per worker, as the
        # broker's Candidates.count does (here without the view's lag).
        for broker in self.brokers:
            broker.tables[host.region].add_count(app, host.name, delta)

    # -- the broker side ----------------------------------------------------------------
    def create(self, now: float, app: str, region: str, ask: Ask, lifetime: float,
               standby: bool) -> bool:
        """One create through a broker; whether a worker took it."""
        result = self.result
        result.creates += 1
        if self.config.routing == "round-robin":
            broker = self.brokers[(result.creates - 1) % len(self.brokers)]
        else:
            broker = self.brokers[self.rng.randrange(len(self.brokers))]
        broker.asked(region, ask)
        request = PlacementRequest(app=app, ask=ask, regions=(region,), image=app)
        index = self._place(broker, request)
        if index is None:
            broker.missed(region)
            result.rejected += 1
            if any(h.admits(ask) for h in self.hosts if h.region == region):
                result.rejected_with_room += 1
            return False
        result.placed += 1
        machine = result.creates  # unique: one create, at most one machine
        host = self.hosts[index]
        seconds = self.config.start_seconds
        if host.pull(app):
            result.pulls += 1
            seconds += self.config.pull_seconds
        result.create_seconds.append(seconds)
        placed = Placed(app, ask, index, end=now + seconds + lifetime)
        self.machines[machine] = placed
        host.take(machine, ask)
        self.count(app, host, 1)
        self.publish(now, index)
        self.push(placed.end, DEPART, machine)
        if standby:
            self._standby(broker, request, machine, placed)
        return True

    def _standby(self, broker: SimBroker, request: PlacementRequest, machine: int,
                 placed: Placed) -> None:
        """A standby is a stopped machine: placed where it could start, holding nothing but
        its image."""
        self.result.standbys += 1
        primary = self.hosts[placed.host]
        broker.asked(request.regions[0], request.ask)
        index = self._place(broker, replace(request, standby_workers=frozenset({primary.name})),
                            claim=False)
        if index is None:
            self.result.standbys_rejected += 1
            return
        placed.standby = index
        self.hosts[index].pull(request.app)
        self.standbys_on.setdefault(index, set()).add(machine)
        if index != placed.host:
            primary.unprotected -= 1

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
                if not host.alive:  # no answer: the broker learns nothing from it
                    self.result.unreachable += 1
                    continue
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
