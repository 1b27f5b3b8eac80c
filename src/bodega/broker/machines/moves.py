"""``POST /v1/apps/{app}/machines/{id}/move``: a machine to another worker (a bodega extension).

The broker chooses the target and holds room there; the machine's worker does the move
(``worker/ops/moves.py``), durably, and the broker answers with the machine as its new
worker answers it::

    locate the machine's worker (the source) and read the machine from it
    └▶ the target: the worker asked for (400 if it is the source or unknown), or
       placement's ranking of the region asked (the machine's own by default), the
       source left out, cordoned workers refused as for a create
       └▶ a reservation there (the placer asks the ranked workers in turn:
          412 insufficient_capacity, saying what was asked, when none has room)
          └▶ the source moves it (it stops it, hands it over, the target takes the
             reservation's room, starts it if it was running; a refusal rolls back)
             └▶ the machine, read from the target

A reservation the move did not use is given back. The machine's placement record is
kept as its create made it.

A start its worker refuses for want of room (full, or cordoned: draining) moves a
stopped machine without a volume to another worker of its region, started there
(``start_elsewhere``), as Fly's start migrates it: the answer says ``migrated`` and the
``new_host``, the machine's events why. A machine with a volume keeps today's refusal.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

from bodega.broker.machines.service import Machines
from bodega.broker.placing.placer import Placer
from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, BodegaError, InsufficientCapacity, NotFound
from bodega.model.machine import Machine, names_registry
from bodega.model.volume import Volume
from bodega.placement import PlacementRequest
from bodega.wire.internal.moves import MOVE_WAIT, MoveBody
from bodega.wire.internal.worker_calls import Reservation, Started
from bodega.wire.public.moves import MoveMachineRequest

MOVABLE_TO_START = frozenset({"stopped", "created", "failed"})  # a start that finds no room
RESERVATION_TTL = 300.0  # the room held on the target while the source stops the machine
MOVE_SLACK = 10.0  # beyond the source's own wait, for the round trips


class MachineMoves:
    def __init__(self, machines: Machines, placer: Placer) -> None:
        self.machines = machines
        self.placer = placer
        self.workers = machines.workers
        self.candidates = machines.candidates

    async def move(self, app: str, machine_id: str, body: MoveMachineRequest, *,
                   nonce: str | None, start: bool = False) -> Machine:
        """``start``: start it there, as a start that found no room on its worker asks."""
        source = await self.machines.locate(app, machine_id)
        try:
            machine = await self.workers.client(source).machine(machine_id, app)
        except NotFound:  # an earlier move whose answer never came took it: the view says
            now = self.machines.moved_from(app, machine_id, source)
            if now is None:
                raise
            source = now
            machine = await self.workers.client(source).machine(machine_id, app)
        if machine.config is None:
            raise BadRequest(f"machine {machine_id} has no config to move")
        ask = Ask.for_config(machine.config)
        volume_id = machine.config.mounts[0].volume if machine.config.mounts else None
        if volume_id:  # it moves with its volume: the target holds its disk too
            volume = self.workers.volumes.get(volume_id) or \
                self.machines.catalog.get(Volume, volume_id)
            if volume is None:
                raise NotFound(f"volume not found: {volume_id}")
            ask = replace(ask, disk_gb=ask.disk_gb + volume.size_gb)
        if body.worker is not None:
            reservation = await self._reserve_on(app, ask, body.worker, source)
            self.candidates.claimed(body.worker, ask)  # as placement holds the room it won
        else:
            reservation = await self._place(app, machine, ask, body.region or machine.region,
                                            source)
        target = reservation.worker
        try:
            url = self.workers.url_of(target)
            if url is None:
                raise BadRequest(f"worker {target} is not in the cluster view")
            await self.workers.client(source).send(
                "POST", f"/v1/machines/{machine_id}/move",
                MoveBody(target=target, target_url=url, reason=body.reason,
                         reservation_id=reservation.id, start=start),
                params=[("app", app)], nonce=nonce, timeout=MOVE_WAIT + MOVE_SLACK)
        except BodegaError as exc:
            self.candidates.released(target, ask)
            with contextlib.suppress(BodegaError):  # unused: its room goes back now
                await self.workers.client(target).release(reservation.id)
            if exc.status in ("insufficient_capacity", "cordoned"):
                raise InsufficientCapacity(
                    f"insufficient_capacity: worker {target} has no room for machine "
                    f"{machine_id} ({ask.describe()}): {exc.message}",
                    details=exc.details) from None
            raise
        # Its room moved with it: placements through this broker count it so at once, as a
        # create and a destroy do, not when each worker's next row says so. A create's claim
        # on the source would otherwise stay counted there while that row never changes (a
        # machine moved away within one row of its create).
        self.candidates.released(source, ask)
        self.workers.remember(machine_id, target)
        if volume_id:
            self.workers.remember(volume_id, target)
        moved = await self.workers.client(target).machine(machine_id, app)
        self.workers.note_machine(moved)
        return moved.public()

    async def start_elsewhere(self, app: str, machine_id: str, refused: BodegaError, *,
                              nonce: str | None, with_volume: bool = False) -> Started:
        """A start its worker refused for want of room (full or cordoned): the machine,
        stopped, starts on another worker of its region instead, the same machine (its
        event says why). ``refused`` is raised again when it has a volume (unless
        ``with_volume``: the start asked ``move=true``, and its data moves with it), or
        when no other worker has room either."""
        source = await self.machines.locate(app, machine_id)
        machine = await self.workers.client(source).machine(machine_id, app)
        config = machine.config
        if config is None or (config.mounts and not with_volume) \
                or machine.state not in MOVABLE_TO_START:
            raise refused
        reason = f"no room to start on {source}: {refused.message}"
        try:
            await self.move(app, machine_id, MoveMachineRequest(reason=reason[:500]),
                            nonce=nonce, start=True)
        except InsufficientCapacity:
            raise refused from None
        return Started(previous_state=machine.state, migrated=True,
                       new_host=self.workers.locate("machines", machine_id, app))

    async def _reserve_on(self, app: str, ask: Ask, worker: str, source: str) -> Reservation:
        if worker == source:
            raise BadRequest(f"invalid_argument: machine is on worker {worker} already")
        if self.candidates.get(worker) is None:
            raise BadRequest(f"invalid_argument: no worker named {worker!r}")
        try:
            return await self.workers.client(worker).reserve(app, ask, RESERVATION_TTL)
        except BodegaError as exc:
            if exc.status in ("insufficient_capacity", "cordoned"):
                raise InsufficientCapacity(
                    f"insufficient_capacity: worker {worker} cannot take {ask.describe()}: "
                    f"{exc.message}", details=exc.details) from None
            raise

    async def _place(self, app: str, machine: Machine, ask: Ask, region: str,
                     source: str) -> Reservation:
        if region not in self.candidates.regions():
            raise BadRequest(f"invalid_argument: no region named {region!r}")
        config = machine.config
        image = config.image if config is not None else None
        request = PlacementRequest(
            app=app, ask=ask, regions=(region,), image=image,
            needs_images=names_registry(image) if image else False,
            avoid=frozenset({source}), avoid_reason="the machine's own worker",
            colocated=self.workers.index.colocated(app))

        async def reserve(worker: str, _held: str | None) -> Reservation:
            return await self.workers.client(worker).reserve(app, ask, RESERVATION_TTL)

        reservation, _record = await self.placer.place(request, reserve,
                                                       self.placer.record(request),
                                                       hedge=False)
        return reservation
