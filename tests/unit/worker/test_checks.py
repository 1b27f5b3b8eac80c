"""Health checks, the pure part: which checks a config defines, when, what a result does."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from bodega.model.machine_config import MachineConfig
from bodega.model.states import MachineState as S
from bodega.worker.core import checks as core
from bodega.worker.core.decisions import CheckResult
from bodega.worker.core.records import MachineRow
from bodega.worker.core.rules import decide
from bodega.worker.drivers.base import TaskHandle


def config(**extra: Any) -> MachineConfig:
    return MachineConfig.model_validate({"image": "app:1", **extra})


WEB = config(
    checks={"db": {"type": "tcp", "port": 5432, "interval": "5s", "grace_period": "2s"}},
    services=[{"internal_port": 8080, "ports": [{"port": 80, "handlers": ["http"]}],
               "checks": [{"type": "http", "path": "/healthz", "interval": "1s",
                           "timeout": "500ms", "headers": [{"name": "X-A", "values": ["1"]}]},
                          {"interval": "10s"}]}],
)


def row(**changes: Any) -> MachineRow:
    handle = TaskHandle(driver="fake", machine_id="m1", instance_id="v1", start_seq=3,
                        pid=10, started_at=1000.0)
    base = MachineRow(
        id="m1", app="web", name="m", region="ams", state=S.STARTED, instance_id="v1",
        config=WEB, millicpus=62, memory_mb=256, gpus=0, gpu_kind=None, ip_index=2,
        private_ip="10.0.0.2", netns=None, cordoned=False, holds_compute=True, handle=handle,
        start_seq=3, restarts=0, volume_id=None, placement_json=None, idempotency_key=None,
        last_exit=None, created_at=0.0, updated_at=0.0)
    return replace(base, **changes)


def test_specs_name_service_checks_as_fly_does_and_parse_durations() -> None:
    specs = core.specs(WEB)
    assert [s.name for s in specs] == [
        "db", "servicecheck-00-http-8080", "servicecheck-01-tcp-8080"]
    db, http, tcp = specs
    assert (db.type, db.port, db.interval, db.grace_period, db.service) == (
        "tcp", 5432, 5.0, 2.0, False)
    assert (http.path, http.method, http.timeout, http.headers, http.service) == (
        "/healthz", "GET", 0.5, (("X-A", "1"),), True)
    assert (tcp.type, tcp.port, tcp.interval, tcp.timeout) == ("tcp", 8080, 10.0, 2.0)


def test_a_top_level_check_without_a_port_probes_nothing() -> None:
    assert core.specs(config(checks={"x": {"type": "tcp"}})) == []


def test_the_check_model_refuses_unknown_keys_and_bad_durations() -> None:
    with pytest.raises(ValidationError):
        config(checks={"x": {"type": "tcp", "port": 1, "bogus": 1}})
    with pytest.raises(ValidationError):
        config(checks={"x": {"type": "tcp", "port": 1, "interval": "soon"}})


def test_first_probe_after_the_grace_period_then_every_interval() -> None:
    db = core.specs(WEB)[0]
    assert core.first_due(db, 100.0) == 102.0
    assert core.next_due(db, 102.5) == 107.5


def test_a_status_change_is_recorded_with_an_event_and_a_repeat_writes_nothing() -> None:
    result = CheckResult("servicecheck-00-http-8080", "passing", "200 OK", "t1", 3)
    decision = decide(row(), result)
    states = decision.changes.checks
    assert states is not None
    assert states.status("servicecheck-00-http-8080") == "passing"
    (note,) = decision.notes
    assert note.event is not None
    assert (note.event.type, note.event.status) == ("check", "passing")
    again = decide(row(checks=states), replace(result, at="t2"))
    assert again.changes.checks is None
    assert not again.notes
    broken = decide(row(checks=states), replace(result, status="critical", output="500"))
    assert broken.changes.checks is not None
    assert broken.changes.checks.status("servicecheck-00-http-8080") == "critical"


def test_a_probe_of_a_former_run_or_of_a_machine_not_started_changes_nothing() -> None:
    result = CheckResult("db", "critical", "refused", "t", 2)
    assert decide(row(), result).changes.checks is None
    assert decide(row(state=S.STOPPING), replace(result, start_seq=3)).changes.checks is None


def test_the_wire_shows_every_check_waiting_until_this_run_reports() -> None:
    former = core.CheckStates(2, {"db": {"status": "passing", "output": "", "updated_at": "t"}})
    shown = core.statuses(WEB, former, 3, True, "t0")
    assert [(c.name, c.status) for c in shown] == [
        ("db", "warning"), ("servicecheck-00-http-8080", "warning"),
        ("servicecheck-01-tcp-8080", "warning")]
    now = core.CheckStates(3, {"db": {"status": "passing", "output": "ok", "updated_at": "t"}})
    assert core.statuses(WEB, now, 3, True, "t0")[0].doc() == {
        "name": "db", "status": "passing", "output": "ok", "updated_at": "t"}
    assert core.statuses(WEB, now, 3, False, "t0") == []


def test_a_stored_config_with_keys_checks_now_refuse_still_loads() -> None:
    from bodega.worker.store.rows import parse_config

    text = ('{"image": "app:1", "checks": {"x": {"type": "tcp", "port": 1, "old": true}}, '
            '"services": [{"internal_port": 80, "checks": [{"path": "/", "gone": 1}]}]}')
    stored = parse_config(text)
    assert stored.checks is not None
    assert stored.checks["x"].port == 1
    with pytest.raises(ValidationError):
        MachineConfig.model_validate_json(text)
