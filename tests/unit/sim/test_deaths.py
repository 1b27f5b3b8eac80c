"""Hosts that die during a run, and creates that take time, worked out by hand."""

from __future__ import annotations

from itertools import pairwise

import pytest

from bodega.sim.engine import SimConfig, simulate
from bodega.sim.fleet import DEFAULT_FLEET, FleetSpec, HostShape, RegionSpec, build_hosts
from bodega.sim.policies import named
from bodega.sim.trace import Arrival, Outage, Trace
from bodega.sim.workload import WorkloadParams, generate

# One broker seeing every change at once; creates instant unless a test says otherwise.
PROMPT = SimConfig(brokers=1, gossip_delay=0, detect_seconds=5, recreate_after=60,
                   start_seconds=0, pull_seconds=0, sample_every=10)


def fleet(hosts: int) -> FleetSpec:
    return FleetSpec(regions=(RegionSpec(name="ams", hosts=(
        HostShape(cpus=8, memory_mb=8192, count=hosts),)),))


def create(at: float, app: str, memory_mb: int, standby: bool = False) -> Arrival:
    return Arrival(time=at, app=app, region="ams", cpus=1, memory_mb=memory_mb,
                   lifetime=10_000, standby=standby)


def machines_at(result: object, at: float) -> list[int]:
    samples = result.samples  # type: ignore[attr-defined]
    return next(s.machines.tolist() for s in samples if s.time >= at)


def test_a_death_loses_its_machines_standbys_take_over_and_the_rest_are_created_again() -> None:
    # Bin-pack puts app-0 (with a standby, which goes to ams-002) and app-1 on ams-001.
    # ams-001 dies at 100 s: both are lost. At 105 s (detected) app-0's standby starts on
    # ams-002; app-1 has none and is created again at 165 s, on the fullest host with room,
    # ams-002. ams-001 is back, empty, at 1,100 s and takes a create that needs a whole host.
    trace = Trace.of("hand", [create(0, "app-0", 4096, standby=True),
                              create(1, "app-1", 4096), create(1200, "app-2", 8192)],
                     [Outage(time=100, host="ams-001", duration=1000)])
    result = simulate(trace, fleet(3), named("binpack"), PROMPT)
    assert (result.host_deaths, result.machines_lost) == (1, 2)
    assert (result.takeovers, result.takeovers_failed) == (1, 0)
    assert (result.recreated, result.recreates_rejected) == (1, 0)
    assert machines_at(result, 0) == [1, 0, 0]
    assert machines_at(result, 100) == [0, 0, 0]  # the standby has not started yet
    assert machines_at(result, 110) == [0, 1, 0]  # app-0 on its standby's host
    assert machines_at(result, 170) == [0, 2, 0]  # app-1 created again
    assert machines_at(result, 1200) == [1, 2, 0]  # the host is back and used
    assert result.creates == 4  # three from the trace, one again
    assert result.rejected == 0


def test_a_standby_with_no_room_left_fails_and_its_machine_is_created_again() -> None:
    # app-0's standby rests on ams-002, which app-1 then fills (a standby holds nothing).
    # When ams-001 dies the standby cannot start, and the re-create finds no room: rejected.
    trace = Trace.of("hand", [create(0, "app-0", 4096, standby=True), create(1, "app-1", 8192)],
                     [Outage(time=100, host="ams-001", duration=1000)])
    result = simulate(trace, fleet(2), named("binpack"), PROMPT)
    assert (result.takeovers, result.takeovers_failed) == (0, 1)
    assert (result.recreated, result.recreates_rejected) == (0, 1)
    assert result.rejected == 1


def test_a_standby_on_the_dead_host_leaves_its_machine_unprotected() -> None:
    # Spread puts app-0 on ams-001 and its standby on ams-002, which then dies.
    trace = Trace.of("hand", [create(0, "app-0", 1024, standby=True), create(200, "b", 1024)],
                     [Outage(time=100, host="ams-002", duration=1000)])
    result = simulate(trace, fleet(2), named("spread"), PROMPT)
    before = next(s for s in result.samples if s.time == 50)
    after = next(s for s in result.samples if s.time == 150)
    assert (before.machines.tolist(), before.unprotected.tolist()) == ([1, 0], [0, 0])
    assert (after.machines.tolist(), after.unprotected.tolist()) == ([1, 0], [1, 0])
    assert machines_at(result, 200) == [2, 0]  # ams-002 is dead: b goes to ams-001
    assert result.machines_lost == 0


def test_until_the_death_is_detected_brokers_ask_the_dead_host_and_get_no_answer() -> None:
    trace = Trace.of("hand", [create(20, "app-0", 1024), create(50, "app-1", 1024)],
                     [Outage(time=10, host="ams-001", duration=1000)])
    slow = PROMPT.model_copy(update={"detect_seconds": 30})
    result = simulate(trace, fleet(2), named("binpack"), slow)
    # At 20 s the broker still ranks ams-001 first (its view: alive, empty, first by name)
    # and gets no answer; at 50 s membership says dead and it is not asked.
    assert (result.placed, result.unreachable, result.refusals) == (2, 1, 0)
    assert machines_at(result, 50) == [0, 2]


def test_a_create_pulls_its_image_once_per_host() -> None:
    config = PROMPT.model_copy(update={"start_seconds": 2, "pull_seconds": 20})
    trace = Trace.of("hand", [
        Arrival(time=0, app="web", region="ams", cpus=1, memory_mb=1024, lifetime=100),
        Arrival(time=1, app="web", region="ams", cpus=1, memory_mb=1024, lifetime=100),
        Arrival(time=130, app="web", region="ams", cpus=1, memory_mb=1024, lifetime=100)])
    result = simulate(trace, FleetSpec(regions=(RegionSpec(name="ams", hosts=(
        HostShape(cpus=8, memory_mb=8192, count=1),)),)), named("binpack"), config)
    assert result.create_seconds == [22.0, 2.0, 2.0]
    assert result.pulls == 1
    # Each holds its room from the yes until its create time and lifetime have passed:
    # the first until 122 s, the second until 103 s.
    assert machines_at(result, 100) == [2]
    assert machines_at(result, 110) == [1]
    assert machines_at(result, 130) == [1]  # the first gone, the third just created


def test_a_death_of_a_host_the_fleet_lacks_is_refused() -> None:
    trace = Trace.of("hand", [create(0, "app-0", 1024)],
                     [Outage(time=10, host="fra-001", duration=10)])
    with pytest.raises(ValueError, match="fra-001"):
        simulate(trace, fleet(1), named("binpack"), PROMPT)


def test_generated_deaths_hit_the_fleet_and_leave_the_arrivals_alone() -> None:
    params = WorkloadParams(hours=24, seed=3, failure_rate=0.5)
    trace = generate(params)
    names = {h.name for h in build_hosts(DEFAULT_FLEET)}
    assert trace.outages
    assert {o.host for o in trace.outages} <= names
    assert all(o.duration >= params.min_repair for o in trace.outages)
    for host in names:  # one at a time per host: the next death comes after the repair
        spells = [o for o in trace.outages if o.host == host]
        assert all(a.time + a.duration <= b.time for a, b in pairwise(spells))
    calm = generate(params.model_copy(update={"failure_rate": 0.0}))
    assert calm.outages == ()
    assert calm.arrivals == trace.arrivals
    assert generate(params.scaled(2)).outages == trace.outages  # the same deaths at any load
