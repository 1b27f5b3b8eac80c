"""Creating a machine: its regions, its placement request, and a retry that lands once.

A create names regions (an expression, or the broker's default), perhaps a
volume (which pins it to the volume's host) and standbys (whose hosts it
avoids); the placer then asks the ranked workers in turn. Every attempt
carries an idempotency key, so a create whose answer was lost is asked again
safely; a client's own ``Idempotency-Key`` makes its machine id, and a retry
finds the machine the first try made, even on a worker the view has not
heard from yet.

The broker decides a machine's name, its id and the volume's host here, once; the
worker checks in the transaction that commits the create only what it alone knows
(its room, its own volume's state, its own names and ids: ``worker/ops/creation.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time

from bodega.broker.placing.placer import Placer
from bodega.broker.view.apps import Apps
from bodega.broker.view.candidates import Candidates
from bodega.broker.view.catalog import Catalog
from bodega.broker.view.workers import Workers
from bodega.model.capacity import Ask
from bodega.model.errors import (
    BadRequest,
    BodegaError,
    Conflict,
    InsufficientCapacity,
    NotFound,
    PreconditionFailed,
    Unavailable,
)
from bodega.model.ids import new_machine_id, new_machine_name
from bodega.model.machine import Machine, names_registry
from bodega.model.volume import Volume
from bodega.placement import PlacementRequest
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.wire.public.fly import CreateMachineRequest

FIND_CONCURRENCY = 32
# Seconds a worker has to say whether an idempotent create's machine is there: a live worker
# answers that read in milliseconds, and one that does not leaves the create undecided.
FIND_PATIENCE = 3.0
LEAST_CALL = 1.0  # seconds: the shortest call to a worker a create still makes


def patience(answer_by: float, most: float) -> float:
    """How long the next call to a worker may take: what is left of a create's time
    (until ``answer_by``, monotonic), at most ``most`` (and at least ``LEAST_CALL``, so a
    call can be made)."""
    return max(LEAST_CALL, min(most, answer_by - time.monotonic()))


def idempotent_id(app: str, key: str) -> str:
    """The machine id a create with ``Idempotency-Key: key`` gets: retries land on it."""
    return hashlib.sha256(f"{app}\0{key}".encode()).hexdigest()[:14]


class MachineCreate:
    def __init__(self, catalog: Catalog, candidates: Candidates, workers: Workers,
                 placer: Placer, apps: Apps, default_region: str, *,
                 answer_within: float) -> None:
        """``answer_within``: seconds a create is answered within, whatever its workers
        do (``BrokerConfig.create_timeout``)."""
        self.catalog = catalog
        self.candidates = candidates
        self.workers = workers
        self.placer = placer
        self.apps = apps
        self.default_region = default_region
        self.answer_within = answer_within

    def placement_request(self, app: str, body: CreateMachineRequest,
                          regions: tuple[str, ...]) -> PlacementRequest:
        config = body.config
        pinned, why = None, ""
        if config.mounts and config.mounts[0].volume:
            volume_id = config.mounts[0].volume
            volume = self.workers.volumes.get(volume_id) or self.catalog.get(Volume, volume_id)
            if volume is None or volume.app != app or volume.state == "destroyed" \
                    or not volume.worker:
                raise NotFound(f"volume not found: {volume_id}")
            pinned, why = volume.worker, f"volume {volume_id} is on {volume.worker}"
            if body.region is None:
                regions = (volume.region,)
        standbys = set()
        for machine_id in config.standbys or []:
            try:
                standbys.add(self.workers.locate("machines", machine_id, app))
            except NotFound:
                raise BadRequest(f"invalid_argument: standbys: no machine {machine_id} in "
                                 f"app {app}") from None
        return PlacementRequest(app=app, ask=Ask.for_config(config), regions=regions,
                                image=config.image, needs_images=names_registry(config.image),
                                pinned_worker=pinned, pinned_reason=why,
                                colocated=self.workers.index.colocated(app),
                                standby_workers=frozenset(standbys))

    async def create(self, app: str, body: CreateMachineRequest,
                     idempotency_key: str | None, owner: str) -> Machine:
        self.apps.require(app)
        answer_by = time.monotonic() + self.answer_within
        regions = self.candidates.asked(body.region, self.default_region)
        machine_id = idempotent_id(app, idempotency_key) if idempotency_key else None
        if machine_id is not None:  # a retry returns what the first try made, name and all
            existing = await self._find(app, machine_id, regions,
                                        patience(answer_by, FIND_PATIENCE))
            if existing is not None:
                return existing.public()
        if body.name and self.workers.index.name_taken(app, body.name):
            raise Conflict(f"a machine named {body.name!r} already exists in app {app}",
                           status="name_taken")
        request = self.placement_request(app, body, regions)
        record = self.placer.record(request)
        name, generated = body.name, body.name is None
        while name is None or (generated and self.workers.index.name_taken(app, name)):
            name = new_machine_name()  # unique in the app as far as this broker knows
        # Always a key, so that a create whose answer was lost can be asked again safely.
        key = idempotency_key or f"bodega-{secrets.token_hex(12)}"
        ids: dict[str, str] = {}  # worker -> the id its machine gets, the same if asked again

        async def ask(worker: str, reservation: str | None) -> Machine:
            # The broker names the id: the client's key's, else one marked with the worker's
            # mark (model/ids.py), so a broker that has not heard of it yet knows whom to ask.
            attempt = CreateMachineBody(
                app=app, config=body.config, name=name, generated_name=generated,
                machine_id=machine_id or ids.setdefault(worker, new_machine_id(worker)),
                reservation_id=reservation,
                skip_launch=body.skip_launch,
                skip_service_registration=body.skip_service_registration,
                lease_ttl=body.lease_ttl, idempotency_key=key, placement=record.answer())
            # A worker that took the create and fell silent (frozen, cut off) is asked
            # again once (``Placer``); both asks fit in the create's time, so the client
            # hears "indeterminate" before it gives up.
            return await self.workers.client(worker).create_machine(
                attempt, owner=owner, timeout=patience(answer_by, self.workers.timeout))

        try:
            machine, _ = await self.placer.place(request, ask, record)
        except InsufficientCapacity as exc:
            if request.pinned_worker is not None:
                raise PreconditionFailed(
                    f"{exc.message}; the volume's host is full: fork the volume to another "
                    "host (create a volume with source_volume_id) and mount that",
                    status="volume_placement_capacity", details=exc.details) from None
            raise
        self.workers.note_machine(machine)
        return machine.public()

    async def _find(self, app: str, machine_id: str, regions: tuple[str, ...],
                    patience: float) -> Machine | None:
        """A machine an earlier attempt of the same idempotent create already made.

        The view may not have it yet (the broker that made it may have died right
        after), so the workers of the regions asked are asked directly. If one of
        them does not answer, the create stops there: placing again could make a
        second machine with the same id.
        """
        known = self.workers.machines.get(machine_id) or self.catalog.get(Machine, machine_id)
        workers = ([known.worker] if known and known.app == app and known.worker else
                   [c.name for region in regions for c in self.candidates.table(region)
                    if c.status == "alive"])
        semaphore = asyncio.Semaphore(FIND_CONCURRENCY)

        silent: list[str] = []

        async def probe(worker: str) -> Machine | None:
            async with semaphore:
                try:
                    return await self.workers.client(worker).machine(machine_id, app,
                                                                     timeout=patience)
                except Unavailable:
                    silent.append(worker)
                    return None
                except BodegaError:
                    return None

        for found in await asyncio.gather(*(probe(w) for w in workers)):
            if found is not None:
                self.workers.note_machine(found)
                return found
        if silent:
            raise Unavailable(
                f"cannot tell whether this Idempotency-Key already made machine {machine_id}: "
                f"{', '.join(sorted(silent))} did not answer; retry shortly")
        return None
