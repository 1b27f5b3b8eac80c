"""Machines through the broker: create places them, everything else goes to their worker.

A machine lives on one worker for its whole life, so after a create (placed
by ``MachineCreate``) the broker only routes: it finds the machine's worker
(its own memory, else the view) and forwards the call, returning what the
worker answered. Lists come from the view, overlaid with what this broker
itself wrote or read most recently, so a client always sees its own writes.
"""

from __future__ import annotations

import logging
from typing import Any

from bodega.broker.apps import Apps
from bodega.broker.candidates import Candidates
from bodega.broker.catalog import Catalog
from bodega.broker.freshness import newest, replaces
from bodega.broker.host_status import GONE_HOSTS, public, unreachable, with_host_status
from bodega.broker.machine_create import MachineCreate
from bodega.broker.placer import Placer
from bodega.broker.workers import Workers
from bodega.model.errors import BodegaError, NotFound, Unavailable
from bodega.model.ids import MACHINE_ID_RE, MARK_DIGITS, worker_mark
from bodega.wire.fly import CreateMachineRequest
from bodega.wire.worker_calls import WorkerRequest

log = logging.getLogger("bodega.broker.machines")

MARKED_ASKED = 4  # workers sharing a mark asked about an unknown id (about N/4096 do)


class Machines:
    def __init__(self, catalog: Catalog, candidates: Candidates, workers: Workers,
                 placer: Placer, apps: Apps, default_region: str) -> None:
        self.catalog = catalog
        self.candidates = candidates
        self.workers = workers
        self.apps = apps
        self.creates = MachineCreate(catalog, candidates, workers, placer, apps,
                                     default_region)

    # -- create: placed by ``MachineCreate`` ------------------------------------------------
    def regions(self, expression: str | None) -> tuple[str, ...]:
        """The regions a create (or a simulated placement) may use, in order."""
        return self.creates.regions(expression)

    async def create(self, app: str, body: CreateMachineRequest,
                     idempotency_key: str | None, owner: str) -> dict[str, Any]:
        return await self.creates.create(app, body, idempotency_key, owner)

    # -- read ------------------------------------------------------------------------------
    def app_machines(self, app: str) -> list[dict[str, Any]]:
        """The view's machines of ``app``, with this broker's newer knowledge laid over."""
        docs = {str(d["id"]): d for d in self.catalog.rows("machines", app=app)}
        for doc in self.workers.machines.all():
            if doc.get("app") == app and replaces(doc, docs.get(str(doc["id"]))):
                docs[str(doc["id"])] = doc
        return sorted(docs.values(), key=lambda d: (str(d.get("created_at", "")), str(d["id"])))

    def list(self, app: str, *, include_deleted: bool, regions: set[str], states: set[str],
             metadata: dict[str, str], summary: bool) -> list[dict[str, Any]]:
        self.apps.require(app)
        out = []
        for doc in self.app_machines(app):
            if not include_deleted and doc.get("state") == "destroyed":
                continue
            if regions and doc.get("region") not in regions:
                continue
            if states and doc.get("state") not in states:
                continue
            meta = (doc.get("config") or {}).get("metadata") or {}
            if any(meta.get(k) != v for k, v in metadata.items()):
                continue
            item = public(with_host_status(doc, self.catalog.member_status))
            item.pop("events", None)
            if summary:
                item.pop("config", None)
            out.append(item)
        return out

    async def get(self, app: str, machine_id: str) -> dict[str, Any]:
        worker = await self.locate(app, machine_id)
        # Declared dead or gone: asking would only wait out the client's timeout.
        if self.catalog.member_status(worker) in GONE_HOSTS \
                and (known := self._last_known(app, machine_id)) is not None:
            return unreachable(known)
        try:
            doc = dict(await self.workers.client(worker).machine(machine_id, app))
        except Unavailable:
            if (known := self._last_known(app, machine_id)) is None:
                raise
            return unreachable(known)
        self.workers.note("machines", doc)
        return public(doc)

    def _last_known(self, app: str, machine_id: str) -> dict[str, Any] | None:
        known = newest(self.workers.machines.get(machine_id),
                       self.catalog.get("machines", machine_id))
        return known if known is not None and known.get("app") == app else None

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

    async def _ask_marked(self, app: str, machine_id: str) -> str | None:
        mark = machine_id[:MARK_DIGITS]
        marked = [c.name for c in self.candidates.all()
                  if c.status == "alive" and worker_mark(c.name) == mark][:MARKED_ASKED]
        for worker in marked:
            try:
                doc = dict(await self.workers.client(worker).machine(machine_id, app))
            except BodegaError:  # not there, or not answering: the view will tell
                continue
            self.workers.note("machines", doc)
            return worker
        return None

    # -- everything else goes to the machine's worker -----------------------------------
    async def forward(self, app: str, machine_id: str, method: str, action: str = "", *,
                      body: WorkerRequest | None = None, params: Any = None,
                      nonce: str | None = None, timeout: float | None = None,
                      owner: str | None = None) -> Any:
        """Send a call to the machine's worker; ``params`` is a dict or (key, value) pairs.

        The worker's answer comes back as it wrote it: the broker routes, it does not
        re-shape what its clients are shown."""
        worker = await self.locate(app, machine_id)
        client = self.workers.client(worker)
        path = f"/v1/machines/{machine_id}" + (f"/{action}" if action else "")
        pairs = list(params.items()) if isinstance(params, dict) else list(params or [])
        query = [*pairs, ("app", app)]
        result = await client.send(method, path, body, params=query, nonce=nonce,
                                   timeout=timeout, owner=owner)
        if isinstance(result, dict) and result.get("id") == machine_id:
            self.workers.note("machines", result)
            return public(result)
        if action == "wait" or method != "GET":
            # The client is about to learn of a change (or that a state was reached): this
            # broker's lists must show it from the moment the answer leaves, so the machine
            # is read back before answering, not after.
            await self._refresh(app, machine_id, worker)
        return result

    async def _refresh(self, app: str, machine_id: str, worker: str) -> None:
        """Read the machine back after a change, so this broker's lists show it at once."""
        try:
            doc = await self.workers.client(worker).machine(machine_id, app)
        except BodegaError:
            return  # the change was made; the view's row will show it
        self.workers.note("machines", dict(doc))
