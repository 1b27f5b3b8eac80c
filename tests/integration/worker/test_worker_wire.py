"""The worker's internal API refuses what it does not know: a misspelled field is a 400 that
names it, and nothing happens, never a field silently dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bodega.model.errors import BadRequest
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.wire.public.placement import PlacementRecord
from tests.tls_kit import TEST_CA

from ..daemon_kit import running_worker_daemon

CONFIG = {"image": "app:1", "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256}}


async def test_a_misspelled_create_field_is_a_400_naming_it_and_creates_nothing(
    tmp_path: Path,
) -> None:
    async with running_worker_daemon(tmp_path) as (_daemon, client):
        body = {"app": "web", "config": CONFIG, "skip_lanch": True}
        with pytest.raises(BadRequest) as raised:
            await client.request("POST", "/v1/machines", json=body)
        assert raised.value.http_status == 400
        assert "skip_lanch" in raised.value.message
        assert "extra" in raised.value.message.lower()  # says the field is not one it knows
        assert await client.list_machines("web", include_deleted=True) == []


@pytest.mark.parametrize(("method", "action", "body"), [
    ("POST", "stop", {"signal": "SIGTERM", "timout": "5s"}),
    ("POST", "lease", {"ttl": 30, "descripton": "deploy"}),
    ("POST", "", {"config": CONFIG, "skip_lanch": True}),
    ("PUT", "metadata", {"metadata": {"k": "v"}, "machine_versoin": "x"}),
])
async def test_misspelled_fields_on_machine_calls_are_400s(
    tmp_path: Path, method: str, action: str, body: dict[str, Any],
) -> None:
    async with running_worker_daemon(tmp_path) as (_daemon, client):
        machine = await client.create_machine({"app": "web", "config": CONFIG,
                                               "skip_launch": True})
        misspelled = next(k for k in body if k not in ("signal", "ttl", "config", "metadata"))
        with pytest.raises(BadRequest) as raised:
            await client.call(method, machine.id, action, json=body)
        assert misspelled in raised.value.message
        assert (await client.machine(machine.id)).state == "created"  # nothing happened


async def test_the_typed_client_refuses_a_misspelled_field_before_sending() -> None:
    from pydantic import ValidationError

    from bodega.wire.internal.worker_client import WorkerClient

    client = WorkerClient("http://127.0.0.1:9")  # nothing listens: nothing is sent
    try:
        with pytest.raises(ValidationError, match="idempotency_kye"):
            await client.create_machine({"app": "web", "config": CONFIG,
                                         "idempotency_kye": "k"})
    finally:
        await client.aclose()
    assert "idempotency_key" in CreateMachineBody.model_fields


async def test_a_create_sent_as_pydantics_bytes_keeps_its_placement_record(
    tmp_path: Path,
) -> None:
    """The typed client sends the body pydantic encodes; the worker keeps the broker's
    placement record (``wire/public/placement.py``, one model end to end) and answers
    ``GET .../placement`` with the same document."""
    from bodega.wire.internal.worker_client import wire_bytes

    record = {"policy": "utility", "asked": {"cpus": 1, "memory_mb": 256},
              "regions": [{"region": "ams", "ranked": [{"worker": "w1", "score": 0.5}],
                           "refusals": [{"worker": "w2", "reason": "naïve ☃"}]}]}
    body = CreateMachineBody.model_validate({"app": "web", "config": CONFIG,
                                             "skip_launch": True, "placement": record})
    encoded = wire_bytes(body)
    assert encoded is not None
    assert json.loads(encoded) == body.model_dump(mode="json", exclude_none=True)
    async with running_worker_daemon(tmp_path) as (_daemon, client):
        machine = await client.create_machine(body)
        kept = PlacementRecord.model_validate(await client.call("GET", machine.id,
                                                                  "placement"))
        assert kept == PlacementRecord.model_validate(record)
        assert kept.regions[0].refusals[0].reason == "naïve ☃"


@pytest.mark.parametrize(("body", "says"), [
    (b"", "required"),
    (b"   ", "required"),
    (b"{not json", "json"),
    (b"\xff\xfe", "json"),
    (b'"a string"', "object"),
    (b'{"app": "web", "config": {"image": "app:1", "guest": {"cpus": NaN}}}', "cpus"),
    (b'{"app": "web", "config": {"image": "app:1"}, "placement": {"duration_ms": NaN}}',
     "placement"),
    (b'{"app": "web", "config": {"image": "app:1"}, "placement": '
     + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"}", "recursion"),
    (b'{"app": "web", "config": {"image": "app:1", "env": {"A": 1}}}', "env"),
    (b'{"app": "", "config": {"image": "app:1"}}', "app"),
])
async def test_a_create_sent_straight_to_the_worker_is_checked_in_one_pass(
    tmp_path: Path, body: bytes, says: str,
) -> None:
    """The worker decodes a create with pydantic's JSON parser, not a dict walk, and still
    answers anything malformed with a 400 in the error shape, never a 500."""
    async with running_worker_daemon(tmp_path) as (daemon, client):
        async with TEST_CA.http() as http:  # as a broker, the one role that may create
            response = await http.post(daemon.url + "/v1/machines", content=body)
        assert response.status_code == 400, response.text
        payload = response.json()
        assert payload["status"] == "invalid_argument"
        assert says in payload["error"].lower(), payload
        assert await client.list_machines(include_deleted=True) == []
