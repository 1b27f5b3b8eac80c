"""Machines through the broker: create places them, everything else goes to their worker.

A machine lives on one worker for its whole life, so after a create (placed
by ``MachineCreate``) the broker only routes: it finds the machine's worker
(its own memory, else the view) and forwards the call. A call whose answer the
broker reads (a machine it notes for read-your-writes) comes back as the model
(``Machine``); any other answer is relayed as the bytes the worker wrote (``relay``).
Lists come from the view, overlaid with what this broker itself wrote or read
most recently, so a client always sees its own writes.
"""

from __future__ import annotations

import logging

from bodega.broker.view.apps import Apps
from bodega.broker.view.candidates import Candidates
from bodega.broker.view.catalog import Catalog
from bodega.broker.view.core.freshness import newest, replaces
from bodega.broker.view.core.host_status import GONE_HOSTS, unreachable, with_host_status
from bodega.broker.view.workers import Workers
from bodega.model.capacity import Ask
from bodega.model.errors import BodegaError, NotFound, Unavailable
from bodega.model.ids import MACHINE_ID_RE, MARK_DIGITS, worker_mark
from bodega.model.machine import Machine
from bodega.wire.internal.worker_calls import UpdateMachineBody, WorkerRequest
from bodega.wire.transport.json_client import Params

log = logging.getLogger("bodega.broker.machines.service")

MARKED_ASKED = 4  # workers sharing a mark asked about an unknown id (about N/4096 do)
REFRESH_TIMEOUT = 2.0  # seconds to read a machine back after a change (see _refresh)


class Machines:
    def __init__(self, catalog: Catalog, candidates: Candidates, workers: Workers,
                 apps: Apps) -> None:
        self.catalog = catalog
        self.candidates = candidates
        self.workers = workers
        self.apps = apps

    # -- read ------------------------------------------------------------------------------
    def app_machines(self, app: str, *, destroyed: bool = True) -> list[Machine]:
        """The view's machines of ``app``, with this broker's newer knowledge laid over.

        Without ``destroyed``, the destroyed ones are left out, and their rows (kept
        for the tombstone TTL, an hour by default) are not even read: only a copy this
        broker holds of a machine the view lacks is checked against its row, one by one,
        so that a copy older than the row's destroy stays hidden."""
        without = None if destroyed else {"state": "destroyed"}
        found = {m.id: m for m in self.catalog.rows(Machine, without, app=app)}
        for machine in self.workers.machines.all():
            if machine.app != app or not replaces(machine, found.get(machine.id)):
                continue
            if destroyed or machine.id in found or (
                    machine.state != "destroyed"
                    and replaces(machine, self.catalog.get(Machine, machine.id))):
                found[machine.id] = machine
        return sorted((m for m in found.values() if destroyed or m.state != "destroyed"),
                      key=lambda m: (m.created_at, m.id))

    def list(self, app: str, *, include_deleted: bool, regions: set[str], states: set[str],
             metadata: dict[str, str], summary: bool) -> list[Machine]:
        """The app's machines as its list answers them: each with its host's status, no
        events, and no config in a ``summary``."""
        self.apps.require(app)
        out = []
        for machine in self.app_machines(app, destroyed=include_deleted):
            if regions and machine.region not in regions:
                continue
            if states and machine.state not in states:
                continue
            meta = machine.metadata()
            if any(meta.get(k) != v for k, v in metadata.items()):
                continue
            listed = with_host_status(machine, self.catalog.member_status).public()
            out.append(listed.model_copy(update={
                "events": None, **({"config": None} if summary else {})}))
        return out

    async def get(self, app: str, machine_id: str) -> Machine:
        worker = await self.locate(app, machine_id)
        # Declared dead or gone: asking would only wait out the client's timeout.
        if self.catalog.member_status(worker) in GONE_HOSTS \
                and (known := self._last_known(app, machine_id)) is not None:
            return unreachable(known)
        try:
            machine = await self.workers.client(worker).machine(machine_id, app)
        except NotFound:
            moved = self.moved_from(app, machine_id, worker)
            if moved is None:
                raise
            machine = await self.workers.client(moved).machine(machine_id, app)
        except Unavailable:
            if (known := self._last_known(app, machine_id)) is None:
                raise
            return unreachable(known)
        self.workers.note_machine(machine)
        return machine.public()

    def _last_known(self, app: str, machine_id: str) -> Machine | None:
        known = newest(self.workers.machines.get(machine_id),
                       self.catalog.get(Machine, machine_id))
        return known if known is not None and known.app == app else None

    async def locate(self, app: str, machine_id: str) -> str:
        self.apps.require(app)
        if not MACHINE_ID_RE.match(machine_id):
            raise NotFound(f"machine not found: {machine_id!r} is not a machine id")
        try:
            return self.workers.locate("machines", machine_id, app)
        except NotFound:
            # Perhaps made through another broker less than a gossip round ago: the id
            # starts with its worker's mark, so ask that worker before answering 404.
            worker = await self._ask_marked(app, machine_id)
            if worker is None:
                raise
            return worker

    def moved_from(self, app: str, machine_id: str, worker: str) -> str | None:
        """The machine's worker now, if the view says it moved from ``worker`` (which
        answered 404): remembered from now on. None if the view says no such thing."""
        row = self.catalog.get(Machine, machine_id)
        if row is None or row.app != app or not row.worker or row.worker == worker:
            return None
        self.workers.remember(machine_id, row.worker)
        return row.worker

    async def _ask_marked(self, app: str, machine_id: str) -> str | None:
        mark = machine_id[:MARK_DIGITS]
        marked = [c.name for c in self.candidates.all()
                  if c.status == "alive" and worker_mark(c.name) == mark][:MARKED_ASKED]
        for worker in marked:
            try:
                machine = await self.workers.client(worker).machine(machine_id, app)
            except BodegaError:  # not there, or not answering: the view will tell
                continue
            self.workers.note_machine(machine)
            return worker
        return None

    # -- everything else goes to the machine's worker -----------------------------------
    async def update(self, app: str, machine_id: str, body: UpdateMachineBody, *,
                     nonce: str | None) -> Machine:
        """Update the machine on its worker; the answer is the machine as updated."""
        worker = await self.locate(app, machine_id)
        machine = await self.workers.client(worker).update_machine(machine_id, body, app=app,
                                                                   nonce=nonce)
        self.workers.note_machine(machine)
        return machine.public()

    async def relay(self, app: str, machine_id: str, method: str, action: str = "", *,
                    body: WorkerRequest | None = None, params: Params = None,
                    nonce: str | None = None, timeout: float | None = None,
                    owner: str | None = None) -> bytes | None:
        """Send a call to the machine's worker; its answer comes back as the bytes it wrote
        (None for none): the broker routes, it does not re-shape what its clients are
        shown. ``params``: a mapping or (key, value) pairs."""
        worker = await self.locate(app, machine_id)
        client = self.workers.client(worker)
        path = f"/v1/machines/{machine_id}" + (f"/{action}" if action else "")
        pairs = list(params.items()) if isinstance(params, dict) else list(params or [])
        query = [*pairs, ("app", app)]
        try:
            answer = await client.send(method, path, body, params=query, nonce=nonce,
                                       timeout=timeout, owner=owner)
        except NotFound:  # moved since this broker learnt where it was?
            moved = self.moved_from(app, machine_id, worker)
            if moved is None:
                raise
            worker = moved
            answer = await self.workers.client(worker).send(
                method, path, body, params=query, nonce=nonce, timeout=timeout, owner=owner)
        if action == "wait" or method != "GET":
            # The client is about to learn of a change (or that a state was reached): this
            # broker's lists must show it from the moment the answer leaves, so the machine
            # is read back before answering, not after.
            machine = await self._refresh(app, machine_id, worker)
            if method == "DELETE" and not action and machine is not None \
                    and machine.state == "destroyed" and machine.config is not None:
                # Its room is free now: placements through this broker may use it before
                # the worker's next row says so (as a create counts its machine at once).
                self.candidates.released(worker, Ask.for_config(machine.config))
        return answer

    async def _refresh(self, app: str, machine_id: str, worker: str) -> Machine | None:
        """Read the machine back after a change, so this broker's lists show it at once.

        Bounded by ``REFRESH_TIMEOUT``, not the worker call's own 10 s: the change is made
        and its answer waits on this, so over a lossy link a slow read-back must not take
        the caller past its own timeout (the view's row shows the change a moment later)."""
        try:
            machine = await self.workers.client(worker).machine(machine_id, app,
                                                                timeout=REFRESH_TIMEOUT)
        except BodegaError:
            return None  # the change was made; the view's row will show it
        self.workers.note_machine(machine)
        return machine
