"""One rule for a machine's host: membership's word for its worker, and checks not trusted
from a host nobody hears."""

from __future__ import annotations

import pytest

from bodega.broker.ui.core.rows import machine_slice
from bodega.broker.view.core.host_status import (
    host_status,
    listed_members,
    unreachable,
    with_host_status,
)
from bodega.cli.commands.cluster import member_label
from bodega.model.machine import CheckStatus, Machine
from bodega.model.machine_config import MachineConfig
from bodega.model.rows import HostTotals, WorkerRow
from bodega.model.volume import Volume
from bodega.wire.public.platform import Member


def started(worker: str = "ams-1") -> Machine:
    return Machine(id="m1", state="started", host_status="ok", worker=worker, app="web",
                   config=MachineConfig(image="img"),
                   checks=[CheckStatus(name="http", status="passing", output="200 OK"),
                           CheckStatus(name="tcp", status="passing")])


@pytest.mark.parametrize(("member", "expected"), [
    ("alive", "ok"), ("suspect", "unreachable"), ("dead", "unreachable"),
    ("left", "unreachable"), (None, "unknown")])
def test_a_hosts_status_is_membership_word_for_its_worker(member: str | None,
                                                           expected: str) -> None:
    assert host_status(member) == expected


def test_a_machine_on_a_live_worker_is_answered_as_its_worker_wrote_it() -> None:
    machine = started()
    assert with_host_status(machine, {"ams-1": "alive"}.get) is machine


@pytest.mark.parametrize(("member", "expected"), [
    ("suspect", "unreachable"), ("dead", "unreachable"), ("left", "unreachable"),
    (None, "unknown")])
def test_a_machine_on_a_host_nobody_hears_keeps_its_state_and_its_checks_are_unknown(
        member: str | None, expected: str) -> None:
    answered = with_host_status(started(), {"ams-1": member}.get)
    assert answered.host_status == expected
    assert answered.state == "started"  # the worker's last word: nobody knows better
    assert answered.checks is not None
    assert [(c.name, c.status) for c in answered.checks] == [("http", "unknown"),
                                                             ("tcp", "unknown")]
    assert answered.checks[0].output == f"host {expected}; last reported passing: 200 OK"
    assert answered.checks[1].output == f"host {expected}; last reported passing"


def test_a_machine_with_no_worker_named_is_unknown() -> None:
    assert with_host_status(started(worker=""), {"": "alive"}.get).host_status == "unknown"


def test_a_volume_follows_the_same_rule() -> None:
    volume = Volume(id="vol_1", host_status="ok", worker="ams-1")
    assert with_host_status(volume, {"ams-1": "dead"}.get).host_status == "unreachable"
    nobody: dict[str, str] = {}
    assert with_host_status(volume, nobody.get).host_status == "unknown"


def test_a_machine_whose_worker_did_not_answer_is_its_last_config_marked_unreachable() -> None:
    answered = unreachable(started())
    assert answered.host_status == "unreachable"
    assert answered.config is None
    assert answered.incomplete_config == MachineConfig(image="img")
    assert {c.status for c in answered.checks or []} == {"unknown"}
    assert answered.worker is None  # a public answer


def test_members_say_their_hosts_status_and_a_forgotten_worker_stays_listed() -> None:
    members = [Member(name="broker", role="broker", status="alive", since="t0"),
               Member(name="ams-1", role="worker", region="ams", status="alive"),
               Member(name="lon-1", role="worker", region="lon", status="left", since="t1")]
    rows = [WorkerRow(name=name, region=region, url="http://x", updated_at=at,
                      totals=HostTotals(cpus=1, memory_mb=256))
            for name, region, at in (("ams-1", "ams", "t2"), ("lon-2", "lon", "t3"))]
    listed = listed_members(members, rows)
    assert [(m.name, m.status, m.host_status, m.since) for m in listed] == [
        ("broker", "alive", "ok", "t0"),
        ("ams-1", "alive", "ok", None),
        ("lon-1", "left", "unreachable", "t1"),
        ("lon-2", "unknown", "unknown", "t3"),  # forgotten by membership, its rows still here
    ]
    assert listed[3].role == "worker"
    assert listed[3].region == "lon"
    assert [member_label(m) for m in listed] == ["alive", "alive", "unreachable (left)",
                                                 "unknown"]


def test_the_dashboard_reads_a_machine_by_the_same_rule() -> None:
    doc = started().doc()
    shown = machine_slice(doc, host_status("dead"))
    assert shown is not None
    assert shown.host_status == "unreachable"
    assert [c.status for c in shown.checks] == ["unknown", "unknown"]
    live = machine_slice(doc, host_status("alive"))
    assert live is not None
    assert (live.host_status, [c.status for c in live.checks]) == ("ok", ["passing", "passing"])
    answered = machine_slice(unreachable(started()).doc())  # an API answer says its own
    assert answered is not None
    assert answered.host_status == "unreachable"
