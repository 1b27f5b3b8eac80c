"""An app's screen: machines by process group and region, releases with the one to roll back to."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.broker.ui.core.apps_view import (
    app_summary,
    group_machines,
    release_rows,
    rollback_version,
)
from bodega.broker.ui.core.rows import MachineSlice, machine_slice
from bodega.cli.commands.deploy import pick_release
from bodega.wire.public.releases import Release


def release(version: int, status: str) -> Release:
    return Release(version=version, status=status, strategy="rolling", image="img")


def test_the_roll_back_target_is_the_newest_complete_release_before_the_newest() -> None:
    rows = release_rows([release(1, "complete"), release(2, "complete"), release(3, "failed")])
    assert [(r.version, r.current, r.rollback_target) for r in rows] == [
        (3, True, False), (2, False, True), (1, False, False)]
    assert rollback_version([release(1, "complete")]) is None  # nothing older to go back to
    assert rollback_version([]) is None


@given(st.lists(st.sampled_from(["complete", "failed", "running", "interrupted"]), max_size=8))
def test_the_screen_marks_what_bodega_rollback_would_pick(statuses: list[str]) -> None:
    found = [release(i + 1, s) for i, s in enumerate(statuses)]
    try:
        expected: int | None = pick_release(
            found, None).version
    except ValueError:
        expected = None
    assert rollback_version(found) == expected


def slice_(mid: str, group: str, region: str, state: str = "started",
           checks: list[dict[str, str]] | None = None) -> MachineSlice:
    found = machine_slice({"id": mid, "name": mid, "app": "web", "state": state,
                           "region": region, "checks": checks or [],
                           "config": {"metadata": {"fly_process_group": group}}})
    assert found is not None
    return found


def test_machines_are_grouped_by_process_group_then_region() -> None:
    groups = group_machines([slice_("b", "app", "syd"), slice_("a", "app", "ams"),
                             slice_("c", "worker", "ams"), slice_("d", "app", "ams", "stopped"),
                             slice_("e", "app", "ams", "destroyed")])
    assert [(g.process_group, g.region, [m.id for m in g.machines]) for g in groups] == [
        ("app", "ams", ["a", "d"]), ("app", "syd", ["b"]), ("worker", "ams", ["c"])]
    assert groups[0].states == (("started", 1), ("stopped", 1))


@pytest.mark.parametrize(("status", "failing"), [("passing", 0), ("critical", 1)])
def test_an_app_summary_counts_checks_that_do_not_pass(status: str, failing: int) -> None:
    summary = app_summary("web", "personal", "default",
                          [slice_("a", "app", "ams", checks=[{"name": "h", "status": status}])])
    assert (summary.machines, summary.failing_checks, summary.regions) == (1, failing, ("ams",))
