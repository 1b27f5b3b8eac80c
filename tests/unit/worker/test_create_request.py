"""The worker reads a create off the wire without copying fields by hand."""

from __future__ import annotations

from dataclasses import fields

from bodega.model.machine_config import MachineConfig
from bodega.wire.placement import Asked, PlacementRecord
from bodega.wire.worker_calls import CreateMachineBody
from bodega.worker.api.machine_routes import create_request
from bodega.worker.ops.machines import CreateRequest


def test_every_wire_field_of_a_create_is_a_field_of_the_workers_create() -> None:
    worker_fields = {f.name for f in fields(CreateRequest)}
    assert set(CreateMachineBody.model_fields) == worker_fields - {"region", "owner"}


def test_a_create_off_the_wire_keeps_every_value() -> None:
    body = CreateMachineBody(
        app="web", config=MachineConfig(image="app:1"), name="web-1", generated_name=True,
        machine_id="0123456789abcd", reservation_id="r1", skip_launch=True,
        skip_service_registration=True, lease_ttl=30, idempotency_key="key",
        placement=PlacementRecord(policy="utility", asked=Asked(gpu_kind=None)),
    )
    request = create_request(body, "ams", "token-1")
    for name in CreateMachineBody.model_fields:
        assert getattr(request, name) == getattr(body, name), name
    assert (request.region, request.owner) == ("ams", "token-1")


def test_the_placement_is_one_typed_record_from_the_wire_to_what_the_worker_keeps() -> None:
    wire = (b'{"app": "web", "config": {"image": "app:1"}, "placement": {"policy": "utility", '
            b'"asked": {"cpus": 1, "memory_mb": 256}, "regions": [{"region": "ams", '
            b'"candidates": 2, "ranked": [{"worker": "w1", "score": 0.5}]}], '
            b'"winner": {"worker": "w1", "score": 0.5, "region": "ams"}}}')
    body = CreateMachineBody.model_validate_json(wire)
    request = create_request(body, "ams", "token-1")
    assert isinstance(request.placement, PlacementRecord)
    assert request.placement.winner is not None
    assert request.placement.winner.worker == "w1"
    kept = PlacementRecord.model_validate_json(
        request.placement.model_dump_json(exclude_none=True))
    assert kept == body.placement
