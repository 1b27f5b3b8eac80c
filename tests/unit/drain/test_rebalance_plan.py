"""The rebalance planner scores a fleet with the simulator's measures (hot hosts and the
spread of utilization, as the hosts run and with their stopped machines started): a
lopsided fleet gets moves that lower the score, a balanced one gets none; running
machines move only when asked and only while their app stays served."""

from __future__ import annotations

import numpy as np

from bodega.drain.core.rebalance import Picture, plan_rebalance
from bodega.model.capacity import Ask
from bodega.sim.measures import coefficient_of_variation
from tests.unit.drain.fleet_kit import fleet, unit, worker

HALF = Ask(cpus=1, memory_mb=512)


def test_a_lopsided_fleet_of_stopped_machines_gets_moves_that_lower_the_score() -> None:
    f = fleet([worker("ams-1"), worker("ams-2"), worker("ams-3")],
              [unit(f"s{i}", f"app{i}", "ams-1", state="stopped", ask=HALF)
               for i in range(4)])  # 2 GB of stopped machines on a 2 GB host
    plan = plan_rebalance(f)
    assert plan.before.hot_if_started == 1
    assert plan.after.hot_if_started == 0
    assert plan.after.key() < plan.before.key()
    assert {m.target for m in plan.moves} == {"ams-2", "ams-3"}
    assert all(m.unit.state == "stopped" for m in plan.moves)
    assert "->" in plan.moves[0].why


def test_a_balanced_fleet_gets_an_empty_plan() -> None:
    f = fleet([worker("ams-1"), worker("ams-2")],
              [unit("a", "web", "ams-1", ask=HALF), unit("b", "web", "ams-2", ask=HALF),
               unit("c", "api", "ams-1", state="stopped"),
               unit("d", "api", "ams-2", state="stopped")])
    assert plan_rebalance(f, running=True).moves == ()


def test_running_machines_move_only_with_running_and_while_their_app_stays_served() -> None:
    hot = Ask(cpus=1, memory_mb=950)
    f = fleet([worker("ams-1"), worker("ams-2")],
              [unit("a", "web", "ams-1", ask=hot), unit("b", "web", "ams-1", ask=hot),
               unit("c", "solo", "ams-1", ask=Ask(cpus=1, memory_mb=64))])
    assert plan_rebalance(f).moves == ()  # running machines stay without --running
    plan = plan_rebalance(f, running=True)
    assert [(m.unit.id, m.target) for m in plan.moves] == [("a", "ams-2")]
    assert plan.before.hot == 1
    assert plan.after.hot == 0
    # the solo app's only machine would leave it unserved while it moves: never moved


def test_the_score_is_the_simulators_spread() -> None:
    f = fleet([worker("ams-1"), worker("ams-2")], [unit("a", "web", "ams-1", ask=HALF)])
    score = Picture(f).score()
    expected = float(coefficient_of_variation(np.array([[0.25, 0.0]]))[0])
    assert score.cv == expected
    assert score.hot == 0


def test_other_regions_and_dead_workers_take_nothing() -> None:
    f = fleet([worker("ams-1"), worker("fra-1", region="fra"),
               worker("ams-2", status="dead")],
              [unit(f"s{i}", "app", "ams-1", state="stopped", ask=HALF) for i in range(4)])
    assert plan_rebalance(f).moves == ()


def test_standbys_and_machines_of_cordoned_workers_stay_where_they_are() -> None:
    f = fleet([worker("ams-1"), worker("ams-2"), worker("ams-3", cordoned=True,
                                                         reason="draining")],
              [unit("p", "web", "ams-2", ask=HALF),
               *(unit(f"s{i}", "web", "ams-1", state="stopped", ask=HALF,
                      standby_for=("p",)) for i in range(4)),
               *(unit(f"c{i}", "api", "ams-3", state="stopped", ask=HALF) for i in range(4))])
    assert plan_rebalance(f).moves == ()


def test_a_big_lopsided_fleet_is_planned_one_kind_of_machine_at_a_time() -> None:
    hosts = [worker(f"ams-{i}", cpus=64, memory_mb=65536) for i in range(1, 41)]
    units = [unit(f"m{i}", f"app{i % 50}", "ams-1", state="stopped", ask=HALF)
             for i in range(400)]
    plan = plan_rebalance(fleet(hosts, units), most=20)
    assert len(plan.moves) == 20
    assert plan.after.key() < plan.before.key()
