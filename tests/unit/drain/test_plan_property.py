"""Whatever the fleet, a drain's plan keeps its rules: every machine of the drained workers
is either moved or stuck, never both; each target is another live, uncordoned worker of
its region, never a drained one; the started machines a plan sends to a worker fit in its
room beside what it already holds; and a rebalance never raises the simulator's score."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bodega.drain.core.facts import Fleet, Unit
from bodega.drain.core.plan import plan_drain
from bodega.drain.core.rebalance import plan_rebalance
from bodega.model.capacity import Ask
from tests.unit.drain.fleet_kit import fleet, unit, worker

STATES = ("started", "started", "stopped", "stopping")


@st.composite
def fleets(draw: st.DrawFn) -> Fleet:
    count = draw(st.integers(2, 6))
    workers = [worker(f"w{i}", region=draw(st.sampled_from(("ams", "fra"))),
                      memory_mb=draw(st.sampled_from((1024, 2048, 4096))),
                      status=draw(st.sampled_from(("alive", "alive", "alive", "dead"))),
                      cordoned=draw(st.booleans()) and draw(st.booleans()))
               for i in range(count)]
    units: list[Unit] = []
    room = {w.name: w.totals.memory_mb for w in workers}
    for i in range(draw(st.integers(0, 14))):
        home = draw(st.sampled_from(workers))
        ask = Ask(cpus=1, memory_mb=draw(st.sampled_from((128, 256, 512))))
        state = draw(st.sampled_from(STATES))
        if state == "started":
            if room[home.name] < ask.memory_mb:
                state = "stopped"
            else:
                room[home.name] -= ask.memory_mb
        units.append(unit(f"m{i}", f"app{draw(st.integers(0, 3))}", home.name, state=state,
                          ask=ask, region=home.region))
    keep = {f"app{i}": draw(st.integers(0, 2)) for i in range(4)}
    return fleet(workers, units, keep)


@settings(max_examples=200, deadline=None)
@given(fleets(), st.data())
def test_a_drains_plan_keeps_its_rules(f: Fleet, data: st.DataObject) -> None:
    drained = data.draw(st.sets(st.sampled_from([w.name for w in f.workers]), min_size=1))
    plan = plan_drain(f, drained)
    moved = [m.unit.id for m in plan.moves]
    stuck = [s.unit.id for s in plan.stuck]
    assert sorted(moved + stuck) == sorted(u.id for u in f.units if u.worker in drained)
    assert not set(moved) & set(stuck)
    workers = {w.name: w for w in f.workers}
    taken = {name: w.used.memory_mb for name, w in workers.items()}
    for move in plan.moves:
        target = workers[move.target]
        assert move.target not in drained
        assert target.status == "alive"
        assert not target.cordoned
        assert target.region == move.unit.region
        if move.unit.started:
            taken[move.target] += move.unit.ask.memory_mb
            assert taken[move.target] <= target.totals.memory_mb


@settings(max_examples=100, deadline=None)
@given(fleets(), st.booleans())
def test_a_rebalance_never_raises_the_score(f: Fleet, running: bool) -> None:
    plan = plan_rebalance(f, running=running)
    assert plan.after.key() <= plan.before.key()
    assert len({m.unit.id for m in plan.moves}) == len(plan.moves)
