"""The drain planner: each machine of the drained workers gets a target in its region on
a worker that is alive and not cordoned or draining, by best fit with an app's machines
spread; the order keeps apps served; a machine with no room anywhere, or whose move would
take its app under min_machines_running, is listed as stuck with why."""

from __future__ import annotations

from dataclasses import replace

from bodega.drain.core.plan import Plan, plan_drain
from bodega.model.capacity import Ask
from tests.unit.drain.fleet_kit import fleet, unit, worker


def targets(plan: Plan) -> dict[str, str]:
    return {m.unit.id: m.target for m in plan.moves}


def test_every_machine_gets_a_live_uncordoned_worker_of_its_region() -> None:
    f = fleet([worker("ams-1"), worker("ams-2"), worker("ams-3", status="dead"),
               worker("ams-4", cordoned=True), worker("fra-1", region="fra")],
              [unit("m1", "web", "ams-1"), unit("m2", "api", "ams-1", state="stopped")])
    plan = plan_drain(f, ["ams-1"])
    assert targets(plan) == {"m1": "ams-2", "m2": "ams-2"}
    assert plan.stuck == ()
    assert plan.drained == ("ams-1",)


def test_best_fit_takes_the_fullest_worker_that_fits_and_spreads_an_app() -> None:
    f = fleet([worker("ams-1"), worker("ams-2", used_mb=1024), worker("ams-3")],
              [unit("a", "web", "ams-1"), unit("b", "web", "ams-2"),
               unit("c", "api", "ams-1")])
    plan = plan_drain(f, ["ams-1"])
    # web already runs on ams-2: its machine goes to ams-3, away from its other one;
    # api has none anywhere else: the fullest worker that fits, ams-2.
    assert targets(plan) == {"a": "ams-3", "c": "ams-2"}
    assert "best fit in ams" in plan.moves[0].why


def test_a_worker_draining_is_never_a_target_and_the_plan_counts_what_it_placed() -> None:
    big = Ask(cpus=1, memory_mb=1536)
    f = fleet([worker("ams-1"), worker("ams-2"), worker("ams-3", cordoned=True,
                                                         reason="draining")],
              [unit("a", "x", "ams-1", ask=big), unit("b", "y", "ams-1", ask=big)])
    plan = plan_drain(f, ["ams-1"])
    assert targets(plan) == {"a": "ams-2"}  # room for one 1.5 GB machine only
    (stuck,) = plan.stuck
    assert stuck.unit.id == "b"
    assert "no worker in ams can take" in stuck.why
    assert "ams-3: draining" in stuck.why
    assert "ams-2: memory" in stuck.why


def test_no_room_anywhere_lists_the_machine_as_stuck_with_each_refusal() -> None:
    f = fleet([worker("ams-1"), worker("ams-2", memory_mb=128)],
              [unit("a", "web", "ams-1")])
    plan = plan_drain(f, ["ams-1"])
    assert plan.moves == ()
    assert [s.unit.id for s in plan.stuck] == ["a"]
    assert "ams-2: memory" in plan.stuck[0].why


def test_served_apps_move_first_the_only_machine_of_an_app_after_and_stopped_last() -> None:
    f = fleet([worker("ams-1", cpus=8, memory_mb=8192), worker("ams-2", cpus=8,
                                                               memory_mb=8192)],
              [unit("solo", "one", "ams-1"), unit("s", "web", "ams-1", state="stopped"),
               unit("w1", "web", "ams-1"), unit("w2", "web", "ams-1")])
    plan = plan_drain(f, ["ams-1"])
    assert [m.unit.id for m in plan.moves] == ["w1", "w2", "solo", "s"]
    assert [m.interrupts for m in plan.moves] == [False, False, True, False]


def test_an_app_at_its_floor_is_held_unless_forced() -> None:
    f = fleet([worker("ams-1"), worker("ams-2")],
              [unit("a", "web", "ams-1"), unit("b", "web", "ams-2"), unit("c", "db", "ams-1")],
              keep={"web": 2, "db": 0})
    plan = plan_drain(f, ["ams-1"])
    assert targets(plan) == {"c": "ams-2"}
    (held,) = plan.stuck
    assert held.unit.id == "a"
    assert "under its min_machines_running 2" in held.why
    forced = plan_drain(f, ["ams-1"], force=True)
    assert targets(forced) == {"c": "ams-2", "a": "ams-2"}


def test_an_unhealthy_machine_does_not_count_toward_its_apps_floor() -> None:
    f = fleet([worker("ams-1"), worker("ams-2")],
              [unit("a", "web", "ams-1"), unit("b", "web", "ams-2", healthy=False)],
              keep={"web": 1})
    plan = plan_drain(f, ["ams-1"])
    assert [s.unit.id for s in plan.stuck] == ["a"]


def test_a_standby_moves_stopped_and_keeps_off_its_primarys_host() -> None:
    f = fleet([worker("ams-1"), worker("ams-2", used_mb=512), worker("ams-3")],
              [unit("p", "web", "ams-2"), unit("q", "web", "ams-3"),
               unit("s", "web", "ams-1", state="stopped", standby_for=("p",))])
    plan = plan_drain(f, ["ams-1"])
    assert targets(plan) == {"s": "ams-3"}
    assert plan.moves[0].unit.state == "stopped"


def test_a_machine_still_settling_waits() -> None:
    f = fleet([worker("ams-1"), worker("ams-2")], [unit("a", "web", "ams-1",
                                                        state="stopping")])
    plan = plan_drain(f, ["ams-1"])
    assert plan.moves == ()
    assert "stopping" in plan.stuck[0].why


def test_machines_elsewhere_stay_put() -> None:
    f = fleet([worker("ams-1"), worker("ams-2")], [unit("a", "web", "ams-2")])
    assert plan_drain(f, ["ams-1"]).moves == ()


def test_a_machine_with_a_volume_moves_with_it() -> None:
    f = fleet([worker("ams-1"), worker("ams-2")],
              [replace(unit("a", "db", "ams-1"), volume="vol_1"), unit("b", "web", "ams-1")])
    plan = plan_drain(f, ["ams-1"])
    assert targets(plan) == {"a": "ams-2", "b": "ams-2"}
    assert plan.stuck == ()
