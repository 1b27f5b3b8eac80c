"""The planner, step by step, without a cluster (as flyctl's own plan tests do)."""

from __future__ import annotations

from typing import Any

import pytest

from bodega.deploy.core.plan import (
    Create,
    Current,
    Desired,
    Destroy,
    Plan,
    PlanError,
    Relabel,
    Update,
    plan,
    pool_size,
)
from bodega.deploy.deployer import current_machines, stopped_by_a_crash
from bodega.model.machine import Machine, MachineEvent

NEW = {"image": "v2"}


def m(mid: str, state: str = "started", group: str = "app", **config: Any) -> Current:
    return Current(id=mid, group=group, state=state, region="ams", config={"image": "v1",
                                                                           **config})


def events(found: list[dict[str, Any]]) -> list[MachineEvent]:
    """Events as the client reads them off the wire."""
    return [MachineEvent.model_validate(event) for event in found]


def want(group: str = "app", services: bool = True, checks: bool = True) -> Desired:
    return Desired(group=group, config=NEW, has_services=services, has_checks=checks)


def steps(p: Plan) -> list[tuple[str, list[str]]]:
    """Each stage as (name, what it does to which machine)."""
    def word(a: Create | Update | Destroy | Relabel) -> str:
        if isinstance(a, Create):
            return f"create {a.ref}" + ("" if a.start else " stopped")
        return f"{a.kind} {a.id}"
    return [(s.name, [word(a) for a in s.actions]) for s in p.stages]


def test_rolling_updates_stopped_together_then_one_started_alone_then_pools() -> None:
    current = [m("m5"), m("m1"), m("m3", "stopped"), m("m2"), m("m4"), m("m6", "stopped")]
    p = plan([want()], current, strategy="rolling", max_unavailable=2)
    assert steps(p) == [
        ("app: update stopped machines", ["update m3", "update m6"]),
        ("app: update first machine", ["update m1"]),
        ("app: update 2-3 of 4", ["update m2", "update m4"]),
        ("app: update 4 of 4", ["update m5"]),
    ]
    assert [s.wait for s in p.stages] == [False, True, True, True]
    assert p.leases == ["m1", "m2", "m3", "m4", "m5", "m6"]
    assert all(isinstance(a, Update) and a.config.to_wire() == NEW
               for s in p.stages for a in s.actions)


def test_a_failed_machine_is_updated_as_a_running_one_and_waited_on() -> None:
    # After a failed release, its machine is failed (or crash looping): the next deploy
    # (a rollback) must start it again, not leave it at rest like a stopped one.
    for state in ("failed", "starting", "restarting"):
        p = plan([want()], [m("m2"), m("m1", state), m("m3", "created")], strategy="rolling")
        assert steps(p) == [("app: update stopped machines", ["update m3"]),
                            ("app: update first machine", ["update m1"]),
                            ("app: update 2 of 2", ["update m2"])], state
        first = p.stages[1].actions[0]
        assert isinstance(first, Update)
        assert first.started
        assert p.stages[1].wait


def test_a_machine_stopped_by_its_own_crash_is_started_again_a_stopped_one_rests() -> None:
    # Once its restarts run out a crashing machine rests as "stopped", like one a user
    # stopped; only its newest event tells them apart.
    crash = [{"type": "exit", "status": "stopped", "source": "flyd",
              "request": {"exit_event": {"exit_code": 3, "requested_stop": False}}}]
    asked = [{"type": "exit", "status": "stopped", "source": "flyd",
              "request": {"exit_event": {"exit_code": 143, "requested_stop": True}}}]
    done = [{"type": "exit", "status": "stopped", "source": "flyd",
             "request": {"exit_event": {"exit_code": 0, "requested_stop": False}}}]
    assert stopped_by_a_crash(events(crash))
    assert not stopped_by_a_crash(events(asked))
    assert not stopped_by_a_crash(events(done))  # a program that finished is at rest
    assert not stopped_by_a_crash(events([{"type": "stop", "status": "stopped"}, *crash]))
    assert not stopped_by_a_crash([])
    listed = [Machine.model_validate({"id": i, "state": "stopped", "region": "ams",
                                      "config": {"image": "v1"}}) for i in ("m1", "m2")]
    current = current_machines(listed, crashed=frozenset({"m1"}))
    p = plan([want()], current, strategy="rolling")
    assert steps(p) == [("app: update stopped machines", ["update m2"]),
                        ("app: update first machine", ["update m1"])]
    assert not p.stages[0].actions[0].started  # type: ignore[union-attr]


def test_max_unavailable_as_a_fraction_of_the_group() -> None:
    assert pool_size(0.5, 10) == 5
    assert pool_size(0.1, 4) == 1  # never zero
    assert pool_size(3, 10) == 3
    current = [m(f"m{i}") for i in range(1, 6)]
    p = plan([want()], current, strategy="rolling", max_unavailable=0.5)
    assert [len(s.actions) for s in p.stages] == [1, 2, 2]


def test_rolling_goes_group_by_group() -> None:
    current = [m("w1", group="worker", ), m("a1"), m("a2")]
    p = plan([want(), want("worker", services=False)], current, strategy="rolling")
    assert steps(p) == [("app: update first machine", ["update a1"]),
                        ("app: update 2 of 2", ["update a2"]),
                        ("worker: update first machine", ["update w1"])]


def test_immediate_updates_everything_at_once_without_waiting() -> None:
    p = plan([want()], [m("m1"), m("m2", "stopped")], strategy="immediate")
    assert steps(p) == [("update all", ["update m1", "update m2"])]
    assert not p.stages[0].wait
    assert [a.started for a in p.stages[0].actions if isinstance(a, Update)] == [True, False]


def test_canary_creates_waits_destroys_then_rolls() -> None:
    p = plan([want()], [m("m1"), m("m2")], strategy="canary")
    assert steps(p) == [("canary", ["create canary-app"]),
                        ("destroy canary", ["destroy canary-app"]),
                        ("app: update first machine", ["update m1"]),
                        ("app: update 2 of 2", ["update m2"])]
    assert p.cleanup_before == 1  # a failing canary is destroyed and nothing else changes
    assert p.leases == ["m1", "m2"]


def test_bluegreen_creates_a_green_per_blue_then_destroys_blue() -> None:
    p = plan([want()], [m("b1"), m("b2")], strategy="bluegreen")
    assert steps(p) == [("create green", ["create green-b1", "create green-b2"]),
                        ("destroy blue", ["destroy b1", "destroy b2"])]
    assert p.cleanup_before == 1  # a failure while green comes up destroys green only


def test_bluegreen_needs_checks() -> None:
    with pytest.raises(PlanError, match="bluegreen needs health checks"):
        plan([want(checks=False)], [m("b1")], strategy="bluegreen")


def test_bluegreen_keeps_a_standby_standing_by_for_its_primarys_green() -> None:
    current = [m("p1", group="w"), m("s1", "stopped", group="w", standbys=["p1"])]
    p = plan([want("w", services=False)], current, strategy="bluegreen")
    greens = [a for a in p.stages[0].actions if isinstance(a, Create)]
    assert [(g.ref, g.start, g.standby_for) for g in greens] == [
        ("green-p1", True, None), ("green-s1", False, "green-p1")]


def test_bluegreen_gives_a_standby_running_beside_its_primary_a_stopped_twin() -> None:
    # The primary's host came back after a takeover: both run until the broker stops the
    # standby. Green must not start both twins.
    current = [m("p1", group="w"), m("s1", group="w", standbys=["p1"])]
    p = plan([want("w")], current, strategy="bluegreen")
    greens = [a for a in p.stages[0].actions if isinstance(a, Create)]
    assert [(g.ref, g.start, g.standby_for) for g in greens] == [
        ("green-p1", True, None), ("green-s1", False, "green-p1")]


def test_a_standby_keeps_its_standbys_through_an_update() -> None:
    current = [m("p1", group="w"), m("s1", "stopped", group="w", standbys=["p1"])]
    p = plan([want("w", services=False)], current, strategy="rolling")
    (standby,) = p.stages[0].actions
    assert isinstance(standby, Update)
    assert standby.config.to_wire() == {**NEW, "standbys": ["p1"]}


def test_first_deploy_with_ha_two_machines_with_services_a_standby_without() -> None:
    p = plan([want("web"), want("worker", services=False)], [], strategy="rolling",
             region="ams")
    assert steps(p) == [("create machines", ["create web-1", "create web-2", "create worker-1"]),
                        ("create standbys", ["create worker-standby stopped"])]
    standby = p.stages[1].actions[0]
    assert isinstance(standby, Create)
    assert standby.standby_for == "worker-1"
    assert {a.region for s in p.stages for a in s.actions if isinstance(a, Create)} == {"ams"}
    assert p.leases == []


def test_first_deploy_without_ha_one_machine_per_group() -> None:
    p = plan([want("web"), want("worker", services=False)], [], strategy="rolling", ha=False)
    assert steps(p) == [("create machines", ["create web-1", "create worker-1"])]


def test_groups_gone_from_the_config_are_destroyed_last() -> None:
    current = [m("a1"), m("old1", group="old"), m("old2", "stopped", group="old")]
    p = plan([want()], current, strategy="rolling")
    assert steps(p)[-1] == ("destroy removed groups", ["destroy old1", "destroy old2"])
    assert isinstance(p.stages[-1].actions[0], Destroy)
    assert p.leases == ["a1", "old1", "old2"]


def test_a_new_group_beside_existing_ones_gets_its_first_machines() -> None:
    p = plan([want(), want("cron", services=False)], [m("a1")], strategy="rolling", ha=False)
    assert steps(p) == [("app: update first machine", ["update a1"]),
                        ("create machines", ["create cron-1"])]


def test_unknown_strategy() -> None:
    with pytest.raises(PlanError, match="unknown strategy"):
        plan([want()], [], strategy="yolo")  # type: ignore[arg-type]
