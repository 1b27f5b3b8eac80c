"""Scaling, pure: per-region changes and the resize plan."""

from __future__ import annotations

import pytest

from bodega.deploy.core.plan import Current, Update
from bodega.deploy.core.scale import count_changes, vm_plan
from bodega.model.machine_config import Guest


def m(mid: str, region: str = "ams", state: str = "started", **config: object) -> Current:
    return Current(id=mid, group="app", state=state, region=region,
                   config={"image": "x", **config})


def test_growing_creates_per_region_from_a_serving_machines_config() -> None:
    machines = [m("a1"), m("a2", state="stopped", standbys=["a1"])]
    (ams, syd) = count_changes(machines, "app", 3, ["ams", "syd"])
    assert (ams.region, ams.create, ams.destroy) == ("ams", 1, [])
    assert (syd.region, syd.create) == ("syd", 3)
    assert ams.template is not None
    assert ams.template.to_wire() == {"image": "x"}  # never a standby's standbys


def test_shrinking_removes_stopped_then_newest() -> None:
    machines = [m("a1"), m("a3"), m("a2", state="stopped"), m("a4")]
    (ams,) = count_changes(machines, "app", 1, [])
    assert ams.destroy == ["a2", "a4", "a3"]
    assert ams.create == 0


def test_several_regions_need_naming_and_an_empty_group_a_deploy() -> None:
    with pytest.raises(ValueError, match="name the regions"):
        count_changes([m("a1"), m("s1", "syd")], "app", 2, [])
    with pytest.raises(ValueError, match="deploy it first"):
        count_changes([m("a1")], "web", 2, [])


def test_resize_rolls_one_started_machine_at_a_time() -> None:
    guest = {"cpu_kind": "shared", "cpus": 2, "memory_mb": 512}
    plan = vm_plan([m("a2"), m("a1"), m("a3", state="stopped")], Guest.model_validate(guest))
    updates = [[a for a in s.actions if isinstance(a, Update)] for s in plan.stages]
    assert [[a.id for a in stage] for stage in updates] == [["a3"], ["a1"], ["a2"]]
    assert all(a.config.to_wire()["guest"] == guest for stage in updates for a in stage)
    assert plan.leases == ["a1", "a2", "a3"]


def test_resize_starts_a_machine_that_rests_after_its_own_crash() -> None:
    guest = {"cpu_kind": "shared", "cpus": 2, "memory_mb": 512}
    crashed = Current(id="a2", group="app", state="stopped", region="ams",
                      config={"image": "x"}, crashed=True)
    plan = vm_plan([m("a1"), crashed, m("a3", state="stopped")], Guest.model_validate(guest))
    updates = [[a for a in s.actions if isinstance(a, Update)] for s in plan.stages]
    assert [[(a.id, a.started) for a in stage] for stage in updates] == [
        [("a3", False)], [("a1", True)], [("a2", True)]]
