"""Volumes: a slice of this host's disk for one app, attached to at most one machine.

A volume's disk is committed the moment it is created and until it is
destroyed; the check and the record are one transaction, like a reservation.
Creating and deleting run as state machines so a crash half way resumes.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from dataclasses import dataclass

from bodega.model.capacity import Ask, shortfalls
from bodega.model.errors import BadRequest, Conflict, NotFound, PreconditionFailed
from bodega.model.ids import new_volume_id
from bodega.worker.core.payloads import CreateVolume, DeleteVolume
from bodega.worker.core.records import VolumeRow
from bodega.worker.ops.runner import Runner
from bodega.worker.store import volume_queries
from bodega.worker.store.database import Operation, Store
from bodega.worker.store.ledger import CapacityRejected, Ledger, usage

VOLUME_NAME_RE = re.compile(r"^[a-z0-9_]{1,30}\Z")  # \Z: "$" lets a final newline in
MAX_SIZE_GB = 500


@dataclass(frozen=True)
class VolumeRequest:
    app: str
    name: str
    region: str
    size_gb: int = 1
    encrypted: bool = True
    fstype: str = "ext4"
    snapshot_retention: int = 5
    auto_backup_enabled: bool = True
    require_unique_zone: bool = True
    snapshot_id: str | None = None  # restore: checked by the caller (ops/snapshots.py)
    volume_id: str | None = None  # the id to make it under; None: a new one


class VolumeService:
    def __init__(self, store: Store, ledger: Ledger, runner: Runner) -> None:
        self.store = store
        self.ledger = ledger
        self.runner = runner
        self._creating: dict[str, asyncio.Future[Operation]] = {}  # volume id -> its create

    def get(self, volume_id: str, app: str | None = None) -> VolumeRow:
        row = volume_queries.get_volume(self.store.db, volume_id)
        if row is None or (app is not None and row.app != app):
            raise NotFound(f"volume not found: {volume_id}")
        return row

    def list(self, app: str | None = None, include_destroyed: bool = False) -> list[VolumeRow]:
        return volume_queries.list_volumes(self.store.db, app, include_destroyed)

    async def create(self, req: VolumeRequest) -> VolumeRow:
        if not VOLUME_NAME_RE.match(req.name):
            raise BadRequest("volume names are 1-30 lowercase letters, digits or underscores")
        if not 1 <= req.size_gb <= MAX_SIZE_GB:
            raise BadRequest(f"size_gb must be between 1 and {MAX_SIZE_GB}")
        if not 1 <= req.snapshot_retention <= 60:
            raise BadRequest("snapshot_retention must be between 1 and 60 days")
        now = self.store.clock()
        volume_id = req.volume_id or new_volume_id()
        with self.store.tx() as conn:
            made = volume_queries.get_volume(conn, volume_id) if req.volume_id else None
            if made is not None:  # asked again (the answer lost): what the first ask made
                if made.app != req.app:
                    raise Conflict(f"volume {volume_id} already exists in another app")
                op = None
            else:
                op = self._insert(conn, req, volume_id, now)
        if op is not None:
            driving = asyncio.ensure_future(self.runner.drive(op))
            self._creating[volume_id] = driving
            driving.add_done_callback(lambda _: self._creating.pop(volume_id, None))
        # Shielded: a caller that gives up (its connection closed) leaves the create going.
        if (creating := self._creating.get(volume_id)) is not None:
            await asyncio.shield(creating)
        return self.get(volume_id)

    def _insert(self, conn: sqlite3.Connection, req: VolumeRequest, volume_id: str,
                now: float) -> Operation:
        """Commit the volume's disk and record it, in the caller's transaction; its create."""
        if self.ledger.cordoned:
            raise CapacityRejected("deploys to this host are temporarily disabled",
                                   status="cordoned")
        if req.require_unique_zone and any(
            v.name == req.name for v in volume_queries.list_volumes(conn, req.app)
        ):
            raise CapacityRejected(
                f"a volume named {req.name!r} already exists on this host",
                status="volume_placement_capacity",
            )
        reasons = shortfalls(self.ledger.totals, usage(conn, now), Ask(disk_gb=req.size_gb),
                             compute=False)
        if reasons:
            raise CapacityRejected("; ".join(reasons), status="insufficient_capacity")
        volume_queries.insert_volume(
            conn,
            VolumeRow(
                id=volume_id, app=req.app, name=req.name, region=req.region,
                size_gb=req.size_gb, state="creating", attached_machine_id=None,
                encrypted=req.encrypted, fstype=req.fstype,
                snapshot_retention=req.snapshot_retention,
                auto_backup_enabled=req.auto_backup_enabled, created_at=now, updated_at=now,
            ),
        )
        return self.runner.begin(conn, volume_id, CreateVolume(snapshot_id=req.snapshot_id))

    def update(self, volume_id: str, app: str, snapshot_retention: int | None,
               auto_backup_enabled: bool | None) -> VolumeRow:
        fields: dict[str, object] = {}
        if snapshot_retention is not None:
            if not 1 <= snapshot_retention <= 60:
                raise BadRequest("snapshot_retention must be between 1 and 60 days")
            fields["snapshot_retention"] = snapshot_retention
        if auto_backup_enabled is not None:
            fields["auto_backup_enabled"] = auto_backup_enabled
        with self.store.tx() as conn:
            self.get(volume_id, app)
            if fields:
                volume_queries.update_volume(conn, volume_id, self.store.clock(), **fields)
                self.store.append(conn, op_id="action", resource_id=volume_id, fsm="action",
                                  step="update_volume", payload=dict(fields))
        return self.get(volume_id)

    def extend(self, volume_id: str, app: str, size_gb: int) -> tuple[VolumeRow, bool]:
        with self.store.tx() as conn:
            row = self.get(volume_id, app)
            if size_gb <= row.size_gb:
                raise BadRequest(f"volumes only grow: {volume_id} is already {row.size_gb} GB")
            if size_gb > MAX_SIZE_GB:
                raise BadRequest(f"size_gb must be at most {MAX_SIZE_GB}")
            used = usage(conn, self.store.clock())
            reasons = shortfalls(self.ledger.totals, used, Ask(disk_gb=size_gb - row.size_gb),
                                 compute=False)
            if reasons:
                raise CapacityRejected("; ".join(reasons))
            volume_queries.update_volume(conn, volume_id, self.store.clock(), size_gb=size_gb)
            self.store.append(conn, op_id="action", resource_id=volume_id, fsm="action",
                              step="extend_volume", payload={"size_gb": size_gb})
        return self.get(volume_id), row.attached_machine_id is not None

    async def delete(self, volume_id: str, app: str) -> VolumeRow:
        with self.store.tx() as conn:
            row = self.get(volume_id, app)
            if row.state == "destroyed":
                return row
            if row.attached_machine_id:
                raise PreconditionFailed(
                    f"failed_precondition: volume {volume_id} is attached to machine "
                    f"{row.attached_machine_id}; destroy the machine first"
                )
            op = self.runner.begin(conn, volume_id, DeleteVolume())
        await self.runner.drive(op)
        return self.get(volume_id)
