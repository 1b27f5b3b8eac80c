"""A machine row as the Fly Machines API shows it (plus the worker-only ``app`` and ``worker``)."""

from __future__ import annotations

from typing import Any

from bodega.model.machine import MachineEvent, image_ref, rfc3339
from bodega.worker.core import checks
from bodega.worker.core.records import MachineRow, VolumeRow


def machine_wire(
    row: MachineRow,
    *,
    worker: str,
    events: list[MachineEvent] | None = None,
    nonce: str | None = None,
    service_host: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.id,
        "name": row.name,
        "state": row.state,
        "region": row.region,
        "instance_id": row.instance_id,
        "version": row.instance_id,
        "private_ip": row.private_ip or "",
        "config": row.config.to_wire(),
        "image_ref": image_ref(row.config.image),
        "created_at": rfc3339(row.created_at),
        "updated_at": rfc3339(row.updated_at),
        "host_status": "ok",
        "app": row.app,
        "worker": worker,
    }
    health = checks.wire(row.config, row.checks, row.start_seq, row.state == "started",
                         rfc3339(row.updated_at))
    if health:
        body["checks"] = health
    if row.cordoned:
        body["cordoned"] = True
    if events is not None:
        body["events"] = [event.to_wire() for event in events]
    if nonce is not None:
        body["nonce"] = nonce
    if service_host is not None:
        body["service_host"] = service_host
    return body


def volume_wire(row: VolumeRow, *, worker: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.id,
        "name": row.name,
        "state": row.state,
        "size_gb": row.size_gb,
        "region": row.region,
        "zone": worker,
        "encrypted": row.encrypted,
        "created_at": rfc3339(row.created_at),
        "fstype": row.fstype,
        "snapshot_retention": row.snapshot_retention,
        "auto_backup_enabled": row.auto_backup_enabled,
        "host_status": "ok",
        "app": row.app,
        "worker": worker,
    }
    if row.attached_machine_id:
        body["attached_machine_id"] = row.attached_machine_id
    return body
