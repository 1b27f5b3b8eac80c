"""Talking to workers: one pooled HTTP client, and where each machine and volume lives.

Machines and volumes never move, so once the broker knows a machine's
worker (from its own create, or from the view) it remembers it. The
``Recent`` cache also keeps the broker's own writes for a while: the view
is replicated, so right after a create it may not yet list the machine, and
a client must still see it on the same broker (read your own writes).
"""

from __future__ import annotations

import ssl
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from bodega.broker.view.candidates import Candidates
from bodega.broker.view.catalog import Catalog
from bodega.broker.view.core.freshness import replaces
from bodega.broker.view.core.machine_index import MachineIndex
from bodega.model.errors import NotFound, Unavailable
from bodega.model.machine import Machine
from bodega.model.rows import WorkerRow
from bodega.model.volume import Volume
from bodega.wire.internal.jobs.worker_client import JobClient
from bodega.wire.internal.worker_client import WorkerClient
from bodega.wire.transport.aiohttp_transport import session

LOCATIONS_KEPT = 100_000
PER_WORKER_CONNECTIONS = 32
RECENT_SECONDS = 60.0
T = TypeVar("T", Machine, Volume)


class Recent(Generic[T]):
    """Answers this broker wrote or read from a worker, newest first, kept ``RECENT_SECONDS``."""

    def __init__(self, keep: float = RECENT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.keep = keep
        self.clock = clock
        self._docs: OrderedDict[str, tuple[float, T]] = OrderedDict()

    def put(self, key: str, doc: T) -> None:
        self._docs[key] = (self.clock(), doc)
        self._docs.move_to_end(key)
        self._expire()

    def get(self, key: str) -> T | None:
        self._expire()
        entry = self._docs.get(key)
        return None if entry is None else entry[1]

    def all(self) -> list[T]:
        self._expire()
        return [doc for _, doc in self._docs.values()]

    def _expire(self) -> None:
        cutoff = self.clock() - self.keep
        while self._docs:
            key, (at, _) = next(iter(self._docs.items()))
            if at >= cutoff:
                break
            del self._docs[key]


class Workers:
    def __init__(self, catalog: Catalog, candidates: Candidates, tls: ssl.SSLContext | None,
                 timeout: float = 10.0) -> None:
        """``tls``: the broker's client context (None: plain, for measurement only)."""
        self.catalog = catalog
        self.candidates = candidates
        self.timeout = timeout
        self.tls = tls  # a port forward's WebSocket to a worker shows the same certificate
        self._session = session(PER_WORKER_CONNECTIONS, ssl=tls)
        self._clients: dict[str, WorkerClient] = {}
        self._job_clients: dict[str, JobClient] = {}
        self._locations: OrderedDict[str, str] = OrderedDict()  # machine/volume id -> worker
        self.machines: Recent[Machine] = Recent()
        self.volumes: Recent[Volume] = Recent()
        self.index = MachineIndex()

    def load(self) -> None:
        """Index every machine the view knows (at start, and after losing the change feed)."""
        for machine in self.catalog.rows(Machine):
            self.index.note(machine)

    def on_machine(self, machine_id: str) -> Machine | None:
        """The view's row for a machine changed; returns the row (None: it is gone)."""
        machine = self.catalog.get(Machine, machine_id)
        if machine is None:
            self.index.forget(machine_id)
        else:
            self.index.note(machine)
        return machine

    async def aclose(self) -> None:
        await self._session.close()

    def url_of(self, worker: str) -> str | None:
        candidate = self.candidates.get(worker)
        if candidate is not None:
            return candidate.url
        row = self.catalog.get(WorkerRow, worker)
        return None if row is None else row.url or None

    def client(self, worker: str) -> WorkerClient:
        url = self.url_of(worker)
        if url is None:
            raise Unavailable(f"worker {worker} is not in the cluster view")
        client = self._clients.get(url)
        if client is None:
            client = WorkerClient(url, client=self._session, timeout=self.timeout)
            self._clients[url] = client
        return client

    def job_client(self, worker: str) -> JobClient:
        """A client for a worker's job routes (its jobs as a home, its probes as a runner),
        on the same connections and credentials as ``client``."""
        url = self.url_of(worker)
        if url is None:
            raise Unavailable(f"worker {worker} is not in the cluster view")
        client = self._job_clients.get(url)
        if client is None:
            client = JobClient(url, client=self._session, timeout=self.timeout)
            self._job_clients[url] = client
        return client

    # -- where things live ----------------------------------------------------------------
    def remember(self, key: str, worker: str) -> None:
        self._locations[key] = worker
        self._locations.move_to_end(key)
        while len(self._locations) > LOCATIONS_KEPT:
            self._locations.popitem(last=False)

    def locate(self, table: str, key: str, app: str) -> str:
        """The worker holding machine or volume ``key`` of ``app``; NotFound otherwise."""
        kind = "machine" if table == "machines" else "volume"
        worker = self._locations.get(key)
        if worker is None:
            found = self.catalog.get(Machine, key) if table == "machines" else \
                self.catalog.get(Volume, key)
            if found is None or found.app != app or not found.worker:
                raise NotFound(f"{kind} not found: {key}")
            worker = found.worker
            self.remember(key, worker)
        return worker

    def note_machine(self, machine: Machine) -> None:
        """Remember a machine a worker returned: where it lives, and for read-your-writes."""
        if not machine.id:
            return
        if machine.worker:
            self.remember(machine.id, machine.worker)
        if not replaces(machine, self.machines.get(machine.id)):
            return  # an answer that left the worker before one we already hold
        self.machines.put(machine.id, machine)
        self.index.note(machine)

    def note_volume(self, volume: Volume) -> None:
        """Remember a volume a worker returned, unless one read since is newer."""
        if not volume.id:
            return
        if volume.worker:
            self.remember(volume.id, volume.worker)
        if replaces(volume, self.volumes.get(volume.id)):
            self.volumes.put(volume.id, volume)
