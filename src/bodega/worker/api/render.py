"""A machine or volume row as the Machines API shows it: the answer models of ``model/``.

The worker's API answers them and its publisher writes them, without events, as its
rows in the registry; both carry the worker-only ``app`` and ``worker`` (and a
machine's ``service_host``), which the broker keeps for itself.
"""

from __future__ import annotations

from bodega.model.machine import Machine, MachineEvent, image_ref, rfc3339
from bodega.model.volume import Volume, VolumeSnapshot
from bodega.worker.core import checks
from bodega.worker.core.records import MachineRow, SnapshotRow, VolumeRow


def machine_answer(
    row: MachineRow,
    *,
    worker: str,
    events: list[MachineEvent] | None = None,
    nonce: str | None = None,
    service_host: str | None = None,
) -> Machine:
    health = checks.statuses(row.config, row.checks, row.start_seq, row.state == "started",
                             rfc3339(row.updated_at))
    return Machine(
        id=row.id, name=row.name, state=row.state, region=row.region,
        instance_id=row.instance_id, version=row.instance_id, private_ip=row.private_ip or "",
        config=row.config, image_ref=image_ref(row.config.image),
        created_at=rfc3339(row.created_at), updated_at=rfc3339(row.updated_at),
        host_status="ok", app=row.app, worker=worker, checks=health or None,
        cordoned=True if row.cordoned else None, events=events, nonce=nonce,
        service_host=service_host, generation=row.generation or None,
    )


def volume_answer(row: VolumeRow, *, worker: str) -> Volume:
    return Volume(
        id=row.id, name=row.name, state=row.state, size_gb=row.size_gb, region=row.region,
        zone=worker, encrypted=row.encrypted, created_at=rfc3339(row.created_at),
        updated_at=rfc3339(row.updated_at),
        fstype=row.fstype, snapshot_retention=row.snapshot_retention,
        auto_backup_enabled=row.auto_backup_enabled, host_status="ok", app=row.app,
        worker=worker, attached_machine_id=row.attached_machine_id or None,
        generation=row.generation or None,
    )


def snapshot_answer(row: SnapshotRow, worker: str) -> VolumeSnapshot:
    """The snapshot as ``worker`` holds it: its holders are its origin and the copies the
    origin knows of (a copy's row knows only its origin and itself)."""
    origin = row.origin or worker
    holders = list(dict.fromkeys([origin, *row.holders, worker]))
    return VolumeSnapshot(id=row.id, created_at=rfc3339(row.created_at), digest=row.digest,
                          retention_days=row.retention_days, size=row.size, status=row.status,
                          volume_size=row.volume_size_gb, holders=holders,
                          off_host=len(holders) > 1)
