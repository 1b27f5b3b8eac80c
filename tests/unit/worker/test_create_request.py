"""The worker reads a create off the wire without copying fields by hand."""

from __future__ import annotations

from dataclasses import fields

from bodega.model.machine_config import MachineConfig
from bodega.wire.worker_calls import CreateMachineBody
from bodega.worker.api.machine_routes import create_request
from bodega.worker.ops.machines import CreateRequest


def test_every_wire_field_of_a_create_is_a_field_of_the_workers_create() -> None:
    worker_fields = {f.name for f in fields(CreateRequest)}
    # ``placement_json``: the wire's placement, already encoded as the worker stores it.
    assert set(CreateMachineBody.model_fields) == worker_fields - {
        "region", "owner", "placement_json"}


def test_a_create_off_the_wire_keeps_every_value() -> None:
    body = CreateMachineBody(
        app="web", config=MachineConfig(image="app:1"), name="web-1", generated_name=True,
        machine_id="0123456789abcd", reservation_id="r1", skip_launch=True,
        skip_service_registration=True, lease_ttl=30, idempotency_key="key",
        placement={"policy": "utility", "asked": {"gpu_kind": None}},
    )
    request = create_request(body, "ams", "token-1")
    for name in CreateMachineBody.model_fields:
        assert getattr(request, name) == getattr(body, name), name
    assert (request.region, request.owner) == ("ams", "token-1")


def test_the_placement_read_off_the_wire_is_encoded_once_as_it_is_stored() -> None:
    wire = (b'{"app": "web", "config": {"image": "app:1"}, '
            b'"placement": {"policy": "utility", "scores": [0.5, 1e-3], "asked": {"gpu": null}}}')
    body = CreateMachineBody.model_validate_json(wire)
    request = create_request(body, "ams", "token-1")
    assert request.placement_json == ('{"policy":"utility","scores":[0.5,0.001],'
                                      '"asked":{"gpu":null}}')
    assert request.placement_json is body.placement_text()  # the same text, not a second one
    assert request.placement == body.placement
