"""Machines through the broker: create places them, everything else goes to their worker.

A machine lives on one worker for its whole life, so after a create the
broker only routes: it finds the machine's worker (its own memory, else the
view) and forwards the call, returning what the worker answered. Lists come
from the view, overlaid with what this broker itself wrote or read most
recently, so a client always sees its own writes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
from typing import Any

from bodega.broker.apps import Apps
from bodega.broker.candidates import Candidates
from bodega.broker.catalog import Catalog
from bodega.broker.freshness import newest, replaces
from bodega.broker.host_status import GONE_HOSTS, with_host_status
from bodega.broker.placer import Placer
from bodega.broker.workers import Workers
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
from bodega.model.ids import MACHINE_ID_RE, MARK_DIGITS, NAME_RE, new_machine_name, worker_mark
from bodega.placement import PlacementRequest
from bodega.placement.regions import parse as parse_regions
from bodega.wire.fly import CreateMachineRequest
from bodega.wire.worker_calls import CreateMachineBody, WorkerRequest

log = logging.getLogger("bodega.broker.machines")

# Fields a worker adds for the cluster's own use; public responses leave them out.
INTERNAL_FIELDS = ("app", "worker", "service_host")
FIND_CONCURRENCY = 32
MARKED_ASKED = 4  # workers sharing a mark asked about an unknown id (about N/4096 do)


def unknown_regions(unknown: list[str], known: list[str]) -> str:
    """The message for regions no worker serves, with the ones that exist."""
    named = ", ".join(unknown)
    return (f"invalid_argument: {'region' if len(unknown) == 1 else 'regions'} {named} "
            f"{'has' if len(unknown) == 1 else 'have'} no workers in this cluster; "
            f"its {'region is' if len(known) == 1 else 'regions are'} {', '.join(known)}")


def public(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in INTERNAL_FIELDS}


def unreachable(known: dict[str, Any]) -> dict[str, Any]:
    """A machine whose host cannot be reached: the last config the view had, marked so."""
    doc = {**known, "host_status": "unreachable"}
    doc["incomplete_config"] = doc.pop("config", {})
    return public(doc)


def idempotent_id(app: str, key: str) -> str:
    """The machine id a create with ``Idempotency-Key: key`` gets: retries land on it."""
    return hashlib.sha256(f"{app}\0{key}".encode()).hexdigest()[:14]


class Machines:
    def __init__(self, catalog: Catalog, candidates: Candidates, workers: Workers,
                 placer: Placer, apps: Apps, default_region: str) -> None:
        self.catalog = catalog
        self.candidates = candidates
        self.workers = workers
        self.placer = placer
        self.apps = apps
        self.default_region = default_region

    # -- create ---------------------------------------------------------------------------
    def regions(self, expression: str | None) -> tuple[str, ...]:
        """The regions a create (or a simulated placement) may use, in order.

        A region the client names that has no worker at all, alive or not, is an
        error (400) naming it and the regions the cluster has: "insufficient
        capacity" would send them waiting for room that will never come. The
        broker's own default is not checked, nor is anything while the cluster
        has no workers yet (placement then says no worker serves it).
        """
        known = self.candidates.regions()
        try:
            regions = parse_regions(expression or self.default_region, known,
                                    nearest=self.default_region.split(",")[0])
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: {exc}") from None
        unknown = [r for r in regions if r not in known]
        if expression and known and unknown:
            raise BadRequest(unknown_regions(unknown, known))
        return regions

    def placement_request(self, app: str, body: CreateMachineRequest,
                          regions: tuple[str, ...]) -> PlacementRequest:
        config = body.config
        pinned, why = None, ""
        if config.mounts and config.mounts[0].volume:
            volume_id = config.mounts[0].volume
            volume = self.workers.volumes.get(volume_id) or self.catalog.get("volumes", volume_id)
            if volume is None or volume.get("app") != app or volume.get("state") == "destroyed":
                raise NotFound(f"volume not found: {volume_id}")
            pinned, why = str(volume["worker"]), f"volume {volume_id} is on {volume['worker']}"
            if body.region is None:
                regions = (str(volume["region"]),)
        standbys = set()
        for machine_id in config.standbys or []:
            try:
                standbys.add(self.workers.locate("machines", machine_id, app))
            except NotFound:
                raise BadRequest(f"invalid_argument: standbys: no machine {machine_id} in "
                                 f"app {app}") from None
        return PlacementRequest(app=app, ask=Ask.for_config(config), regions=regions,
                                image=config.image, pinned_worker=pinned, pinned_reason=why,
                                colocated=self.workers.index.colocated(app),
                                standby_workers=frozenset(standbys))

    async def create(self, app: str, body: CreateMachineRequest,
                     idempotency_key: str | None, owner: str) -> dict[str, Any]:
        self.apps.require(app)
        if body.name is not None and not NAME_RE.match(body.name):
            raise BadRequest(f"invalid_argument: name {body.name!r}: use lowercase letters, "
                             "digits and -, at most 63")
        regions = self.regions(body.region)
        machine_id = idempotent_id(app, idempotency_key) if idempotency_key else None
        if machine_id is not None:  # a retry returns what the first try made, name and all
            existing = await self._find(app, machine_id, regions)
            if existing is not None:
                return public(existing)
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

        async def ask(worker: str, reservation: str | None) -> dict[str, Any]:
            attempt = CreateMachineBody(
                app=app, config=body.config, name=name, generated_name=generated,
                machine_id=machine_id, reservation_id=reservation,
                skip_launch=body.skip_launch,
                skip_service_registration=body.skip_service_registration,
                lease_ttl=body.lease_ttl, idempotency_key=key, placement=record.to_json())
            return await self.workers.client(worker).create_machine(attempt, owner=owner)

        try:
            machine, _ = await self.placer.place(request, ask, record)
        except InsufficientCapacity as exc:
            if request.pinned_worker is not None:
                raise PreconditionFailed(
                    f"{exc.message}; the volume's host is full: fork the volume to another "
                    "host (create a volume with source_volume_id) and mount that",
                    status="volume_placement_capacity", details=exc.details) from None
            raise
        self.workers.note("machines", machine)
        return public(machine)

    async def _find(self, app: str, machine_id: str,
                    regions: tuple[str, ...]) -> dict[str, Any] | None:
        """A machine an earlier attempt of the same idempotent create already made.

        The view may not have it yet (the broker that made it may have died right
        after), so the workers of the regions asked are asked directly. If one of
        them does not answer, the create stops there: placing again could make a
        second machine with the same id.
        """
        known = self.workers.machines.get(machine_id) or self.catalog.get("machines", machine_id)
        workers = ([str(known["worker"])] if known and known.get("app") == app else
                   [c.name for region in regions for c in self.candidates.table(region)
                    if c.status == "alive"])
        semaphore = asyncio.Semaphore(FIND_CONCURRENCY)

        silent: list[str] = []

        async def probe(worker: str) -> dict[str, Any] | None:
            async with semaphore:
                try:
                    return dict(await self.workers.client(worker).machine(machine_id, app))
                except Unavailable:
                    silent.append(worker)
                    return None
                except BodegaError:
                    return None

        for found in await asyncio.gather(*(probe(w) for w in workers)):
            if found is not None:
                self.workers.note("machines", found)
                return found
        if silent:
            raise Unavailable(
                f"cannot tell whether this Idempotency-Key already made machine {machine_id}: "
                f"{', '.join(sorted(silent))} did not answer; retry shortly")
        return None

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
