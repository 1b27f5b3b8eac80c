"""The worker acts on the create body it is sent: no copy of it, every field reaches the
machine it records; only its own region and the call's owner are added."""

from __future__ import annotations

from bodega.model.ids import new_machine_id
from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.wire.public.placement import Asked, PlacementRecord
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver

W = tuple[Worker, FakeDriver]


async def test_every_field_of_the_body_reaches_the_machine(worker: W) -> None:
    w, _ = worker
    placement = PlacementRecord(policy="utility", asked=Asked(gpu_kind=None))
    body = CreateMachineBody(
        app="web", config=MachineConfig(image="app:1"), name="web-1", generated_name=False,
        machine_id=new_machine_id(), skip_launch=True, skip_service_registration=True,
        lease_ttl=30, idempotency_key="key-1", placement=placement,
    )
    row, nonce = await w.machines.creation.create(body, owner="token-1")
    await w.machines.settle()
    assert (row.id, row.app, row.name) == (body.machine_id, "web", "web-1")
    assert row.region == w.config.region  # the worker's own, never the caller's
    assert row.state == "created"  # skip_launch
    assert row.cordoned  # skip_service_registration
    assert row.idempotency_key == "key-1"
    assert row.config == body.config
    assert row.placement_json is not None
    assert PlacementRecord.model_validate_json(row.placement_json) == placement
    lease = w.actions.lease(row.id)
    assert (lease.nonce, lease.owner) == (nonce, "token-1")


async def test_the_body_is_not_changed_by_the_create(worker: W) -> None:
    """A made-up name that collides is replaced in the row, not in the body the caller
    holds: a retry of the same body finds the machine the first try made."""
    w, _ = worker
    first = CreateMachineBody(app="web", config=MachineConfig(image="app:1"), name="taken",
                              skip_launch=True)
    await w.machines.creation.create(first)
    body = CreateMachineBody(app="web", config=MachineConfig(image="app:1"), name="taken",
                             generated_name=True, skip_launch=True, idempotency_key="k")
    sent = body.model_copy(deep=True)
    row, _ = await w.machines.creation.create(body)
    assert row.name != "taken"
    assert body == sent
    again, _ = await w.machines.creation.create(body)
    assert again.id == row.id
    await w.machines.settle()


def test_the_placement_is_one_typed_record_from_the_wire_to_what_the_worker_keeps() -> None:
    wire = (b'{"app": "web", "config": {"image": "app:1"}, "placement": {"policy": "utility", '
            b'"asked": {"cpus": 1, "memory_mb": 256}, "regions": [{"region": "ams", '
            b'"candidates": 2, "ranked": [{"worker": "w1", "score": 0.5}]}], '
            b'"winner": {"worker": "w1", "score": 0.5, "region": "ams"}}}')
    body = CreateMachineBody.model_validate_json(wire)
    assert isinstance(body.placement, PlacementRecord)
    assert body.placement.winner is not None
    assert body.placement.winner.worker == "w1"
    kept = PlacementRecord.model_validate_json(body.placement.model_dump_json(exclude_none=True))
    assert kept == body.placement
