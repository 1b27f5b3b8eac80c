"""The simulator against cases worked out by hand: placement order, races through stale
views, refusals, rejections with room elsewhere, departures, standbys, determinism."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bodega.placement import UtilityScorer
from bodega.sim.engine import SimConfig, simulate
from bodega.sim.fleet import FleetSpec, HostShape, RegionSpec
from bodega.sim.policies import named
from bodega.sim.trace import Arrival, Trace
from bodega.sim.workload import WorkloadParams, generate


def fleet(*memory: int, cpus: int = 8) -> FleetSpec:
    return FleetSpec(regions=(RegionSpec(name="ams", hosts=tuple(
        HostShape(cpus=cpus, memory_mb=m, count=1) for m in memory)),))


def arrivals(*specs: tuple[float, int], lifetime: float = 1000.0,
             standby: bool = False) -> Trace:
    return Trace.of("hand", [
        Arrival(time=t, app=f"app-{i}", region="ams", cpus=1, memory_mb=mb, lifetime=lifetime,
                standby=standby) for i, (t, mb) in enumerate(specs)])


def test_binpack_fills_the_first_host_then_the_next_then_rejects() -> None:
    # Two 8 GB hosts, five 4 GB creates: bin-pack fills ams-001 (the tie goes to the first
    # name), then ams-002; the fifth finds no room anywhere and is rejected, with no room lost.
    trace = arrivals((0, 4096), (1, 4096), (2, 4096), (3, 4096), (4, 4096))
    result = simulate(trace, fleet(8192, 8192), named("binpack"),
                      SimConfig(brokers=1, gossip_delay=0, sample_every=10))
    assert (result.placed, result.rejected, result.rejected_with_room) == (4, 1, 0)
    assert result.refusals == 0
    first = result.samples[0]  # at t=0, taken after what arrives at that instant
    assert first.utilization.tolist() == [0.5, 0.0]
    last = result.samples[-1]
    assert last.utilization.tolist() == [1.0, 1.0]
    assert last.machines.tolist() == [2, 2]


def test_spread_alternates_hosts() -> None:
    trace = arrivals((0, 2048), (1, 2048), (2, 2048))
    result = simulate(trace, fleet(8192, 8192), named("spread"),
                      SimConfig(brokers=1, gossip_delay=0, sample_every=10))
    assert result.samples[-1].machines.tolist() == [2, 1]


def test_a_stale_view_races_and_the_worker_says_no() -> None:
    # Broker 0 puts 6 GB on ams-001 at t=0; broker 1 places 6 GB at t=1, but its view of
    # ams-001 is 10 s old: it asks ams-001 (bin-pack's tie goes to the first name), hears no,
    # believes what ams-001 has free and moves on to ams-002.
    trace = arrivals((0, 6144), (1, 6144))
    stale = SimConfig(brokers=2, gossip_delay=10, jitter=0, routing="round-robin")
    result = simulate(trace, fleet(8192, 8192), named("binpack"), stale)
    assert (result.placed, result.refusals) == (2, 1)
    fresh = simulate(trace, fleet(8192, 8192), named("binpack"),
                     stale.model_copy(update={"gossip_delay": 0.0}))
    assert (fresh.placed, fresh.refusals) == (2, 0)


def test_after_the_gossip_delay_the_view_has_caught_up() -> None:
    trace = arrivals((0, 6144), (11, 6144))  # the second create comes after the 10 s delay
    result = simulate(trace, fleet(8192, 8192), named("binpack"),
                      SimConfig(brokers=2, gossip_delay=10, jitter=0, routing="round-robin"))
    assert (result.placed, result.refusals) == (2, 0)


def test_a_create_out_of_attempts_is_rejected_though_room_existed() -> None:
    trace = arrivals((0, 6144), (1, 6144))
    result = simulate(trace, fleet(8192, 8192), named("binpack"),
                      SimConfig(brokers=2, gossip_delay=10, jitter=0, routing="round-robin",
                                max_attempts=1))
    assert (result.placed, result.rejected, result.rejected_with_room) == (1, 1, 1)
    assert result.refusals == 1


def test_the_omniscient_allocator_never_races() -> None:
    trace = arrivals(*[(t * 0.1, 2048) for t in range(12)])
    result = simulate(trace, fleet(8192, 8192, 8192), named("omniscient"),
                      SimConfig(brokers=8, gossip_delay=60))
    assert (result.placed, result.rejected, result.refusals) == (12, 0, 0)


def test_a_departure_frees_its_room() -> None:
    trace = Trace.of("hand", [
        Arrival(time=0, app="a", region="ams", cpus=1, memory_mb=8192, lifetime=5),
        Arrival(time=3, app="b", region="ams", cpus=1, memory_mb=8192, lifetime=5),
        Arrival(time=6, app="c", region="ams", cpus=1, memory_mb=8192, lifetime=5),
    ])
    result = simulate(trace, fleet(8192), named("utility"),
                      SimConfig(brokers=1, gossip_delay=0, sample_every=1, start_seconds=0,
                                pull_seconds=0))
    assert (result.placed, result.rejected) == (2, 1)  # b found a full host; c came after a
    by_time = {s.time: s.utilization[0] for s in result.samples}
    assert by_time[4.0] == 1.0
    assert by_time[6.0] == 1.0


def test_a_standby_goes_to_another_host_and_protects_its_machine() -> None:
    trace = arrivals((0, 1024), (1, 1024), standby=True)
    result = simulate(trace, fleet(8192, 8192), named("binpack"),
                      SimConfig(brokers=1, gossip_delay=0, sample_every=10))
    # bin-pack would put both standbys on the fuller host, but that is their primary's host:
    # the standby penalty sends them to the other one.
    assert (result.standbys, result.standbys_rejected) == (2, 0)
    last = result.samples[-1]
    assert last.machines.tolist() == [2, 0]  # standbys are stopped: they hold nothing
    assert last.unprotected.tolist() == [0, 0]


def test_without_standbys_every_machine_is_exposed() -> None:
    trace = arrivals((0, 1024), (1, 1024))
    result = simulate(trace, fleet(8192, 8192), named("binpack"),
                      SimConfig(brokers=1, gossip_delay=0, sample_every=10))
    assert result.samples[-1].unprotected.tolist() == [2, 0]


def test_runs_are_deterministic_under_a_seed() -> None:
    trace = generate(WorkloadParams(hours=0.25, apps=40, rate=0.4, seed=3))
    small = FleetSpec(regions=(RegionSpec(name=r, hosts=(
        HostShape(cpus=8, memory_mb=16384, count=4),)) for r in ("ams", "iad")))
    config = SimConfig(brokers=3, gossip_delay=5, seed=11)

    def key(policy: str, seed: int) -> tuple[object, ...]:
        r = simulate(trace, small, named(policy), config.model_copy(update={"seed": seed}))
        return (r.placed, r.rejected, r.refusals,
                [s.utilization.tolist() for s in r.samples])

    assert key("random", 11) == key("random", 11)
    assert key("pow-2", 11) == key("pow-2", 11)
    assert key("random", 11) != key("random", 12)


def test_config_and_policy_names_are_checked() -> None:
    with pytest.raises(ValidationError):
        SimConfig(brokers=0)
    with pytest.raises(ValidationError):
        SimConfig.model_validate({"gossip": 1})
    with pytest.raises(ValueError, match="unknown policy"):
        named("katamari")
    with pytest.raises(ValueError, match="at least 1"):
        named("pow-0")
    assert named("pow-3").policy.sample == 3
    assert named("utility+p2").policy.sample == 2


def test_the_hole_policy_is_the_default_curves_keeping_a_hole() -> None:
    default, keeping = named("utility").policy.scorer, named("hole").policy.scorer
    assert isinstance(default, UtilityScorer)
    assert isinstance(keeping, UtilityScorer)
    assert (default.weights.hole, keeping.weights.hole) == (0.0, 1.0)
    assert (keeping.cpu, keeping.memory) == (default.cpu, default.memory)
