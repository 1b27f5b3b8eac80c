"""Volumes through the broker: placed like machines (by disk), then owned by their host.

A volume is a slice of one worker's disk, so creating one is a placement
(filtered also on the ``compute`` hint, so the host can run the machine that
will mount it, and on ``require_unique_zone``: no two volumes of one name on
a host) and everything after goes to that worker.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from dataclasses import replace

from bodega.broker.machines.create import patience
from bodega.broker.machines.service import Machines
from bodega.broker.placing.placer import Placer
from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import Catalog
from bodega.broker.view.core.freshness import replaces
from bodega.broker.view.core.host_status import with_host_status
from bodega.broker.view.workers import Workers
from bodega.model.capacity import Ask
from bodega.model.errors import (
    BadRequest,
    InsufficientCapacity,
    NotFound,
    Unavailable,
    Unreachable,
)
from bodega.model.ids import new_volume_id
from bodega.model.rows import WorkerRow
from bodega.model.volume import ExtendVolumeAnswer, Volume, VolumeSnapshot
from bodega.placement import PlacementRequest
from bodega.wire.internal.worker_calls import CreateVolumeBody, ExtendVolumeBody, WorkerRequest
from bodega.wire.internal.worker_client import wire_bytes
from bodega.wire.public.fly import CreateVolumeRequest


class Volumes:
    def __init__(self, catalog: Catalog, workers: Workers, placer: Placer, apps: Apps,
                 machines: Machines, default_region: str, *, answer_within: float) -> None:
        """``answer_within``: seconds a create is answered within, whatever its workers
        do (``BrokerConfig.create_timeout``), as for machines."""
        self.catalog = catalog
        self.workers = workers
        self.placer = placer
        self.apps = apps
        self.machines = machines
        self.default_region = default_region
        self.answer_within = answer_within

    def app_volumes(self, app: str) -> list[Volume]:
        found = {v.id: v for v in self.catalog.rows(Volume, app=app)}
        for volume in self.workers.volumes.all():  # what this broker read since, if newer
            if volume.app == app and replaces(volume, found.get(volume.id)):
                found[volume.id] = volume
        return sorted(found.values(), key=lambda v: (v.created_at, v.id))

    def list(self, app: str, include_deleted: bool = False) -> list[Volume]:
        self.apps.require(app)
        return [with_host_status(v, self.catalog.member_status).public()
                for v in self.app_volumes(app) if include_deleted or v.state != "destroyed"]

    async def create(self, app: str, body: CreateVolumeRequest) -> Volume:
        self.apps.require(app)
        answer_by = time.monotonic() + self.answer_within
        if body.snapshot_id and body.source_volume_id:
            raise BadRequest("invalid_argument: give snapshot_id or source_volume_id, not both")
        size_gb = body.size_gb
        holders: builtins.list[str] = []
        data_region: str | None = None
        if body.snapshot_id or body.source_volume_id:
            # The data is wherever a holder of the snapshot is: the new volume is placed as
            # any other, and its worker fetches the snapshot from one of them.
            holders, snapshot = await (self.find_snapshot(app, body.snapshot_id)
                                       if body.snapshot_id else
                                       self._fork_source(app, str(body.source_volume_id)))
            if "size_gb" not in body.model_fields_set:
                size_gb = max(size_gb, snapshot.volume_size)
            body = body.model_copy(update={"snapshot_id": snapshot.id, "size_gb": size_gb})
            # Its origin's region (the first of its holders, as every holder tells it).
            data_region = self._region_of([*(snapshot.holders or [])[:1], *holders])
        regions = self.machines.candidates.asked(body.region, self.default_region)
        if data_region is not None and body.region is None:
            # Unasked, the copy's region is its data's (a fork's: its source's), as a
            # machine mounting a volume goes to the volume's: the broker's own default
            # region may hold no host with the data.
            regions = (data_region,)
        guest = body.compute
        ask = Ask(cpu_kind=guest.cpu_kind, cpus=guest.cpus, memory_mb=guest.memory_mb,
                  disk_gb=size_gb) if guest else Ask(cpus=0, memory_mb=0, disk_gb=size_gb)
        avoid: frozenset[str] = frozenset()
        if body.require_unique_zone:
            avoid = frozenset(v.worker for v in self.app_volumes(app)
                              if v.name == body.name and v.state != "destroyed" and v.worker)
        request = PlacementRequest(
            app=app, ask=ask, regions=regions, avoid=avoid,
            avoid_reason=f"a volume named {body.name!r} is already on this host")
        wire = CreateVolumeBody(app=app, name=body.name, size_gb=size_gb,
                                encrypted=body.encrypted, fstype=body.fstype,
                                snapshot_retention=body.snapshot_retention,
                                auto_backup_enabled=body.auto_backup_enabled,
                                require_unique_zone=body.require_unique_zone,
                                snapshot_id=body.snapshot_id, snapshot_holders=holders,
                                # One id for every ask: a worker asked again returns the
                                # volume its first answer (lost) made, never a second one.
                                volume_id=new_volume_id())

        async def ask_worker(worker: str, _reservation: str | None) -> Volume:
            return await self.workers.client(worker).create_volume(
                wire, timeout=patience(answer_by, self.workers.timeout))

        claim = Ask(cpus=0, memory_mb=0, disk_gb=size_gb)
        holder = self._holder_in(holders, regions, avoid)
        if holder is not None:
            # A worker holding the snapshot restores it with a local copy, no transfer:
            # tried first; with no room there, the volume is placed as any other.
            pinned = replace(request, pinned_worker=holder,
                             pinned_reason="another worker holds a copy of the snapshot")
            try:
                volume, _ = await self.placer.place(pinned, ask_worker,
                                                    self.placer.record(pinned),
                                                    claim=claim, hedge=False)
                self.workers.note_volume(volume)
                return volume.public()
            except InsufficientCapacity:
                pass
        record = self.placer.record(request)
        volume, _ = await self.placer.place(request, ask_worker, record, claim=claim,
                                            hedge=False)
        self.workers.note_volume(volume)
        return volume.public()

    def _holder_in(self, holders: builtins.list[str], regions: tuple[str, ...],
                   avoid: frozenset[str]) -> str | None:
        """The first holder of the snapshot that could take the new volume: alive, not
        cordoned, in an asked region, not avoided."""
        for worker in holders:
            host = self.machines.candidates.get(worker)
            if (host is not None and host.status == "alive" and not host.cordoned
                    and host.region in regions and worker not in avoid):
                return worker
        return None

    def locate(self, app: str, volume_id: str) -> str:
        self.apps.require(app)
        if not volume_id.startswith("vol_"):
            raise NotFound(f"volume not found: {volume_id}")
        worker = self.workers.locate("volumes", volume_id, app)
        # Moved with its machine since this broker learnt where it was: the view's row of
        # a newer generation says where it is now (``broker/machines/moves.py``).
        row = self.catalog.get(Volume, volume_id)
        if row is not None and row.generation and row.worker and row.worker != worker:
            self.workers.remember(volume_id, row.worker)
            return row.worker
        return worker

    async def call(self, app: str, volume_id: str, method: str,
                   body: WorkerRequest | None = None) -> Volume:
        """Read, update or delete the volume on its worker; the answer is the volume."""
        worker = self.locate(app, volume_id)
        volume = await self.workers.client(worker).answer(
            Volume, method, f"/v1/volumes/{volume_id}", encoded=wire_bytes(body),
            params={"app": app})
        self.workers.note_volume(volume)
        return volume.public()

    async def extend(self, app: str, volume_id: str, size_gb: int) -> ExtendVolumeAnswer:
        worker = self.locate(app, volume_id)
        extended = await self.workers.client(worker).answer(
            ExtendVolumeAnswer, "PUT", f"/v1/volumes/{volume_id}/extend",
            encoded=wire_bytes(ExtendVolumeBody(size_gb=size_gb)), params={"app": app})
        self.workers.note_volume(extended.volume)
        return extended.model_copy(update={"volume": extended.volume.public()})

    # -- snapshots --------------------------------------------------------------------
    async def snapshots(self, app: str, volume_id: str) -> builtins.list[VolumeSnapshot]:
        """The volume's snapshots, from its worker; with that one unreachable (its host
        lost), the copies other workers keep of them, so they can still be restored."""
        worker = self.locate(app, volume_id)
        try:
            return await self._snapshots_on(worker, app, volume_id)
        except Unavailable:
            others = sorted(row.name for row in self.catalog.rows(WorkerRow)
                            if row.name != worker and
                            self.catalog.member_status(row.name) not in ("dead", "left"))
            answers = await asyncio.gather(
                *(self._snapshots_on(name, app, volume_id) for name in others),
                return_exceptions=True)
            found = {s.id: s for answer in answers if isinstance(answer, builtins.list)
                     for s in answer}
            if not found:
                raise
            return sorted(found.values(), key=lambda s: (s.created_at, s.id))

    async def _snapshots_on(self, worker: str, app: str, volume_id: str
                            ) -> builtins.list[VolumeSnapshot]:
        return await self.workers.client(worker).answers(
            VolumeSnapshot, "GET", f"/v1/volumes/{volume_id}/snapshots", params={"app": app})

    async def take_snapshot(self, app: str, volume_id: str) -> VolumeSnapshot:
        worker = self.locate(app, volume_id)
        return await self.workers.client(worker).answer(
            VolumeSnapshot, "POST", f"/v1/volumes/{volume_id}/snapshots", params={"app": app})

    def _region_of(self, holders: builtins.list[str]) -> str | None:
        """The region of the first holder the view knows."""
        for worker in holders:
            host = self.machines.candidates.get(worker)
            if host is not None:
                return host.region
            row = self.catalog.get(WorkerRow, worker)
            if row is not None:
                return row.region
        return None

    async def _fork_source(self, app: str, volume_id: str
                           ) -> tuple[builtins.list[str], VolumeSnapshot]:
        """A fork is a snapshot of the source taken now (listed with its others), restored
        wherever placement puts the new volume."""
        worker = self.locate(app, volume_id)
        snapshot = await self.take_snapshot(app, volume_id)
        return list(dict.fromkeys([worker, *(snapshot.holders or [])])), snapshot

    async def find_snapshot(self, app: str, snapshot_id: str
                            ) -> tuple[builtins.list[str], VolumeSnapshot]:
        """The workers holding snapshot ``snapshot_id`` of ``app`` (its origin and the
        copies sent off its host; those that answered first), and the snapshot.

        Every worker of the view that gossip does not say is gone is asked, at once.
        Where none that answered holds it but one could not be asked, the snapshot may
        well be there: that is a 503 naming the host (as a fork of a volume on it
        answers), not a 404."""
        names = sorted(row.name for row in self.catalog.rows(WorkerRow)
                       if self.catalog.member_status(row.name) not in ("dead", "left"))

        async def ask(worker: str) -> VolumeSnapshot:
            return await self.workers.client(worker).answer(
                VolumeSnapshot, "GET", f"/v1/snapshots/{snapshot_id}", params={"app": app})

        answers = await asyncio.gather(*(ask(name) for name in names), return_exceptions=True)
        answered: builtins.list[str] = []  # holders that answered: reachable now
        told: builtins.list[str] = []  # holders they name (the origin, other copies)
        found: VolumeSnapshot | None = None
        unanswered: builtins.list[str] = []
        for worker, answer in zip(names, answers, strict=True):
            if isinstance(answer, VolumeSnapshot):
                found = found or answer
                answered.append(worker)
                told.extend(answer.holders or [])
            elif isinstance(answer, Unavailable):
                why = answer.reason if isinstance(answer, Unreachable) and answer.reason \
                    else str(answer)
                unanswered.append(f"{worker} ({why})")
            elif not isinstance(answer, NotFound):
                raise answer
        if found is not None:
            return list(dict.fromkeys([*answered, *told])), found
        if unanswered:
            raise Unavailable(f"snapshot {snapshot_id} may be on a host that is unreachable: "
                              f"{', '.join(unanswered)}; retry once it is back")
        raise NotFound(f"snapshot not found: {snapshot_id}")
