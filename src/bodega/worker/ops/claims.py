"""What a create claims (room, a volume) and what an update may change; checked in-transaction."""

from __future__ import annotations

import sqlite3

from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, Conflict, PreconditionFailed
from bodega.model.machine_config import MachineConfig
from bodega.worker.core.records import MachineRow
from bodega.worker.store import queries, volume_queries
from bodega.worker.store.ledger import CORDON_MESSAGE, CapacityRejected, Ledger


def claim_room(
    conn: sqlite3.Connection, ledger: Ledger, reservation_id: str | None, ask: Ask,
    machine_id: str,
) -> None:
    """Turn a reservation into the machine's hold, or check room directly without one."""
    if reservation_id is None:
        if ledger.cordoned:
            raise CapacityRejected(CORDON_MESSAGE, status="cordoned")
        ledger.check_room(conn, ask)
        return
    reservation = queries.get_reservation(conn, reservation_id)
    if reservation is None or reservation.claimed_by is not None:
        raise Conflict(f"reservation {reservation_id} not found or already claimed")
    if reservation.expires_at <= ledger.store.clock():
        raise Conflict(f"reservation {reservation_id} expired")
    if (reservation.millicpus < ledger.totals.millicpus_for(ask)
            or reservation.memory_mb < ask.memory_mb or reservation.gpus < ask.gpus):
        raise Conflict(f"reservation {reservation_id} is smaller than the machine")
    # The reservation stops counting and the machine starts holding, in one commit.
    queries.claim_reservation(conn, reservation_id, machine_id)


def attach_volume(
    conn: sqlite3.Connection, app: str, config: MachineConfig, machine_id: str, now: float
) -> str | None:
    """Attach the volume ``config.mounts`` names; it must be on this host and free."""
    mounts = config.mounts or []
    if not mounts:
        return None
    volume_id = mounts[0].volume
    if not volume_id:
        raise BadRequest("mounts[0].volume is required")
    volume = volume_queries.get_volume(conn, volume_id)
    if volume is None or volume.state == "destroyed" or volume.app != app:
        raise PreconditionFailed(f"volume {volume_id} not found on this host",
                                 status="volume_placement_capacity")
    if volume.attached_machine_id and volume.attached_machine_id != machine_id:
        raise PreconditionFailed(
            f"volume {volume_id} is already attached to machine {volume.attached_machine_id}"
        )
    volume_queries.update_volume(conn, volume_id, now, attached_machine_id=machine_id)
    return volume_id


def check_update(
    row: MachineRow, config: MachineConfig, current_version: str | None, name: str | None,
    region: str | None, *, needs_command: bool,
) -> None:
    """Refuse updates the API does not allow: stale version, rename, move, volume swap."""
    if current_version and current_version != row.instance_id:
        raise Conflict(
            f"failed_precondition: current_version {current_version} does not match "
            f"the machine's version {row.instance_id}"
        )
    if name and name != row.name:
        raise BadRequest("a machine's name cannot change")
    if region and region != row.region:
        raise BadRequest("a machine's region cannot change")
    new_volume = (config.mounts[0].volume if config.mounts else None) or None
    if new_volume != row.volume_id:
        raise PreconditionFailed(
            "failed_precondition: a machine's volume cannot be swapped; "
            "destroy and recreate the machine instead"
        )
    if needs_command and not config.command():
        raise BadRequest("the process driver needs config.init.exec (or processes[0].exec)")
