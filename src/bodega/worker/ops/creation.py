"""What a create asks for, and recording a new machine in the create's transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bodega.model.capacity import Ask
from bodega.model.errors import Conflict
from bodega.model.ids import new_machine_name, new_ulid
from bodega.model.machine_config import MachineConfig
from bodega.worker.core import Create, Decision, decide
from bodega.worker.core.records import MachineRow
from bodega.worker.host.network import WIRE_AHEAD, Network
from bodega.worker.ops.claims import attach_volume, claim_room
from bodega.worker.store import leases, queries
from bodega.worker.store.ledger import CapacityRejected, Ledger


@dataclass(frozen=True)
class CreateRequest:
    app: str
    config: MachineConfig
    region: str
    name: str | None = None
    generated_name: bool = False  # ``name`` was made up, not asked for: replace it if taken
    machine_id: str | None = None
    reservation_id: str | None = None
    skip_launch: bool = False
    skip_service_registration: bool = False
    lease_ttl: int | None = None
    idempotency_key: str | None = None
    placement: dict[str, Any] | None = None
    # ``placement`` as the JSON text it is stored as, when the wire encoded it already.
    placement_json: str | None = None
    owner: str = "bodega"


@dataclass
class Recorded:
    """What a create's transaction found or made: an earlier machine, or a lease's nonce."""

    earlier: MachineRow | None = None
    nonce: str | None = None


def free_address(conn: sqlite3.Connection, network: Network, ip_range: tuple[int, int],
                 launcher_waiting: Callable[[int], bool] = lambda _index: False) -> int | None:
    """Of the lowest free addresses: the first with a launcher waiting in its namespace (a
    start there only execs), else the first whose namespace is wired, else the lowest."""
    free = queries.free_ip_indexes(conn, *ip_range, WIRE_AHEAD + 1)
    return next((i for i in free if launcher_waiting(i)),
                next((i for i in free if network.ready(i)), free[0] if free else None))


def record_machine(
    conn: sqlite3.Connection, req: CreateRequest, machine_id: str, name: str, *,
    ledger: Ledger, network: Network, ip_range: tuple[int, int], clock: Callable[[], float],
    outcome: Recorded, launcher_waiting: Callable[[int], bool] = lambda _index: False,
) -> Decision:
    """Record the machine (or find the one an earlier try made); the core's create decision."""
    rename = req.name is None or req.generated_name
    now = clock()
    ask = Ask.for_config(req.config)
    if req.idempotency_key:
        outcome.earlier = queries.machine_by_idempotency_key(conn, req.app, req.idempotency_key)
        if outcome.earlier is not None:
            return Decision()
    earlier = queries.get_machine(conn, machine_id)
    if earlier is not None:
        if earlier.app != req.app:
            raise Conflict(f"machine id {machine_id} is taken")
        outcome.earlier = earlier
        return Decision()
    while queries.machine_name_taken(conn, req.app, name):
        if not rename:
            raise Conflict(f"a machine named {name!r} already exists in app {req.app}",
                           status="name_taken")
        name = new_machine_name()  # a made-up name collided: make up another
    claim_room(conn, ledger, req.reservation_id, ask, machine_id)
    volume_id = attach_volume(conn, req.app, req.config, machine_id, now)
    ip_index = free_address(conn, network, ip_range, launcher_waiting)
    if ip_index is None:
        raise CapacityRejected("could not reserve resource for machine: no free addresses",
                               details={"full": True})  # room by the figures, yet full
    decision = decide(None, Create(launch=not req.skip_launch))
    instance_id = new_ulid(int(now * 1000))
    row = MachineRow(
        id=machine_id, app=req.app, name=name, region=req.region,
        state=str(decision.changes.state), instance_id=instance_id, config=req.config,
        millicpus=ledger.totals.millicpus_for(ask), memory_mb=ask.memory_mb,
        gpus=ask.gpus, gpu_kind=ask.gpu_kind, ip_index=ip_index,
        private_ip=network.address(ip_index),
        netns=None, cordoned=req.skip_service_registration,
        holds_compute=bool(decision.changes.holds_compute),
        handle=None, start_seq=0, restarts=0, volume_id=volume_id,
        placement_json=req.placement_json if req.placement_json is not None else
        None if req.placement is None else json.dumps(req.placement, separators=(",", ":")),
        idempotency_key=req.idempotency_key, last_exit=None,
        created_at=now, updated_at=now,
    )
    queries.insert_machine(conn, row)
    queries.insert_version(conn, machine_id, instance_id,
                          req.config.model_dump_json(exclude_none=True), now)
    if req.lease_ttl:
        lease = leases.acquire(
            conn, machine_id, version=instance_id, ttl=req.lease_ttl, description="",
            owner=req.owner, nonce=None, now=now,
        )
        outcome.nonce = lease.nonce
    return decision
