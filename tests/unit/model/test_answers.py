"""The answer models: what a field absent on the wire stays, what a reader of another
version's answer keeps, and what the broker hides from its clients."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.errors import BadRequest
from bodega.model.machine import Machine, MachineEvent, image_ref
from bodega.model.machine_answers import LeaseAnswer
from bodega.model.machine_config import MachineConfig
from bodega.model.volume import Volume
from bodega.wire.public.fly import checked

# A machine as a worker answers it: every field it always writes, an optional one (the
# events) and a config key bodega does not act on.
WORKER_ANSWER: dict[str, Any] = {
    "id": "0a1b2c3d4e5f60", "name": "quiet-pine", "state": "started", "region": "ams",
    "instance_id": "01J0000000000000000000000A", "version": "01J0000000000000000000000A",
    "private_ip": "10.0.0.2",
    "config": {"image": "registry.local/web:1",
               "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256},
               "services": [{"protocol": "tcp", "internal_port": 8080, "autostop": True}],
               "dns": {"skip_registration": True}},
    "image_ref": {"registry": "registry.local", "repository": "web", "tag": "1", "digest": "",
                  "labels": {}},
    "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:01Z",
    "host_status": "ok", "app": "web", "worker": "ams-1",
    "events": [{"id": "e1", "type": "exit", "status": "stopped", "source": "flyd",
                "timestamp": 1, "request": {"exit_event": {  # as a worker writes it
                    "exit_code": 3, "oom_killed": False, "requested_stop": False,
                    "exited_at": "2026-01-01T00:00:00Z"}}}],
    "service_host": "10.0.0.2",
}


def test_an_answer_read_and_written_again_is_the_same_json() -> None:
    machine = Machine.model_validate_json(json.dumps(WORKER_ANSWER))
    assert json.loads(machine.wire()) == WORKER_ANSWER
    # An optional field the answer did not carry is absent again, never null.
    assert "checks" not in json.loads(machine.wire())
    assert "nonce" not in machine.doc()


def test_the_public_answer_leaves_out_only_what_the_worker_keeps_for_the_cluster() -> None:
    shown = json.loads(Machine.model_validate(WORKER_ANSWER).public().wire())
    assert shown == {k: v for k, v in WORKER_ANSWER.items()
                     if k not in ("app", "worker", "service_host")}
    volume = Volume(id="vol_1", name="data", state="created", size_gb=1, region="ams",
                    zone="ams-1", encrypted=True, created_at="t", fstype="ext4",
                    snapshot_retention=5, auto_backup_enabled=True, host_status="ok",
                    app="web", worker="ams-1")
    assert set(json.loads(volume.public().wire())) == set(volume.doc()) - {"app", "worker"}


def test_a_newer_components_fields_are_ignored_and_a_configs_own_are_kept() -> None:
    newer = {**WORKER_ANSWER, "gpu_state": "warm",
             "config": {**WORKER_ANSWER["config"], "vendor": {"x": 1}}}
    machine = Machine.model_validate(newer)
    assert "gpu_state" not in machine.doc()  # a reader says only what its models know
    assert machine.config is not None
    assert machine.config.to_wire()["vendor"] == {"x": 1}  # the API echoes config keys


def test_a_row_a_model_cannot_read_is_left_out_of_the_list_not_a_failure() -> None:
    catalog = MemoryCatalog()
    catalog.put("machines", "good", {**WORKER_ANSWER, "id": "good"})
    catalog.put("machines", "bad", {**WORKER_ANSWER, "id": "bad", "cordoned": "perhaps"})
    assert [m.id for m in catalog.rows(Machine, app="web")] == ["good"]


def test_an_events_exit_and_error_are_read_from_its_request() -> None:
    (event,) = Machine.model_validate(WORKER_ANSWER).events or []
    exit_event = event.exit_event()
    assert exit_event is not None
    assert (exit_event.exit_code, exit_event.signal, exit_event.failed) == (3, None, True)
    failed = MachineEvent(type="launch", status="failed", request={"error": "no such file"})
    assert (failed.exit_event(), failed.error()) == (None, "no such file")
    assert (event.reason(), failed.reason()) == (None, None)
    again = MachineEvent(type="start", status="starting", source="flyd",
                         request={"reason": "host restarted"})
    assert (again.reason(), again.trouble()) == ("host restarted", None)


def test_an_image_reference_is_split_as_the_api_reports_it() -> None:
    assert image_ref("library/alpine").doc() == {
        "registry": "docker-hub-mirror.fly.io", "repository": "library/alpine",
        "tag": "latest", "digest": "", "labels": {}}
    assert image_ref("Not An Image!").doc() == {
        "registry": "", "repository": "Not An Image!", "tag": "", "digest": "", "labels": {}}


def test_the_lease_envelope_is_what_flyctl_reads() -> None:
    answer = LeaseAnswer.model_validate({"status": "success", "data": {
        "nonce": "n", "expires_at": 10, "owner": "o", "description": "d", "version": "v"}})
    assert json.loads(answer.wire()) == {"status": "success", "data": {
        "nonce": "n", "expires_at": 10, "owner": "o", "description": "d", "version": "v"}}


def test_a_body_checked_by_a_client_fails_as_the_broker_would_answer() -> None:
    with pytest.raises(BadRequest) as refused:
        checked(MachineConfig, {"image": "x", "guest": {"memory_mb": 300}}, "config")
    assert refused.value.message == ("invalid_argument: config.guest.memory_mb: Value error, "
                                     "memory_mb must be a multiple of 128")


def _exit(code: int, *, at: int, requested: bool = False, signal: int | None = None,
          oom: bool = False) -> MachineEvent:
    return MachineEvent(type="exit", status="stopped", timestamp=at, request={"exit_event": {
        "exit_code": code, "requested_stop": requested, "signal": signal, "oom_killed": oom}})


@pytest.mark.parametrize(("events", "trouble"), [
    # A step that failed: its error, whatever came before.
    ([MachineEvent(type="launch", status="failed", timestamp=2,
                   request={"error": "exec: nope: not found in PATH /bin", "step": "prepare"}),
      MachineEvent(type="launch", status="created", timestamp=1)],
     "exec: nope: not found in PATH /bin"),
    # A run that failed on its own, by code, signal or the OOM killer.
    ([_exit(3, at=5)], "exit code 3"),
    ([_exit(137, at=5, signal=9, oom=True)],
     "exit code 137, signal 9, killed for lack of memory (OOM)"),
    # Stopped because asked, or a clean exit: nothing went wrong.
    ([_exit(143, at=5, requested=True)], None),
    ([_exit(0, at=5)], None),
    # Only the newest event counts: a failure before a later clean start is over.
    ([MachineEvent(type="start", status="started", timestamp=9), _exit(3, at=5)], None),
    # Events in any order: the newest by time is the one read.
    ([_exit(3, at=5), MachineEvent(type="start", status="started", timestamp=9)], None),
    ([], None),
])
def test_a_machine_says_what_went_wrong_from_its_newest_event(
        events: list[MachineEvent], trouble: str | None) -> None:
    assert Machine(id="m1", state="failed", events=events).trouble() == trouble


# Events as workers before EventRequest stored them in their op log (request a plain JSON
# object, its keys in the order the worker wrote them): a worker resuming that log and a
# broker answering them must read each and answer it byte for byte as it was stored.
STORED_EVENTS = [
    '{"id":"01A","type":"exit","status":"stopped","source":"flyd","timestamp":1,"request":'
    '{"exit_event":{"exit_code":143,"oom_killed":false,"requested_stop":true,'
    '"exited_at":"2026-01-01T00:00:00Z","signal":15}}}',
    '{"id":"01B","type":"exit","status":"restarting","source":"flyd","timestamp":2,"request":'
    '{"exit_event":{"exit_code":1,"oom_killed":false,"requested_stop":false,'
    '"exited_at":"2026-01-01T00:00:00Z"},"reason":"host restarted"}}',
    '{"id":"01C","type":"start","status":"failed","source":"flyd","timestamp":3,"request":'
    '{"error":"exec: no such file","step":"spawn"}}',
    '{"id":"01D","type":"launch","status":"failed","source":"user","timestamp":4,"request":'
    '{"error":"no room","reason":"host restarted"}}',
    '{"id":"01E","type":"check","status":"passing","source":"flyd","timestamp":5,"request":'
    '{"name":"web","status":"passing","output":"200 OK"}}',
    '{"id":"01F","type":"start","status":"started","source":"user","timestamp":6}',
    # a key this version has no field for is kept and answered as it came
    '{"id":"01G","type":"update","status":"updated","source":"user","timestamp":7,"request":'
    '{"error":"x","from_a_newer_worker":{"n":1}}}',
]


@pytest.mark.parametrize("stored", STORED_EVENTS)
def test_an_event_stored_before_its_request_was_typed_reads_and_answers_as_stored(
        stored: str) -> None:
    event = MachineEvent.model_validate_json(stored)
    assert event.wire() == stored.encode()


def test_an_event_request_is_read_by_its_fields() -> None:
    exit_event, _, failed, launch, *_ = (MachineEvent.model_validate_json(s)
                                          for s in STORED_EVENTS)
    found = exit_event.exit_event()
    assert found is not None
    assert (found.requested_stop, found.signal) == (True, 15)
    assert (failed.error(), failed.reason()) == ("exec: no such file", None)
    assert launch.reason() == "host restarted"
