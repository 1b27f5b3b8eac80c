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
from typing import Any

from bodega.broker.candidates import Candidates
from bodega.broker.catalog import Catalog
from bodega.broker.freshness import replaces
from bodega.broker.machine_index import MachineIndex
from bodega.model.errors import NotFound, Unavailable
from bodega.wire.json_client import session
from bodega.wire.worker_client import WorkerClient

LOCATIONS_KEPT = 100_000
PER_WORKER_CONNECTIONS = 32
RECENT_SECONDS = 60.0


class Recent:
    """Docs this broker wrote or read from a worker, newest first, kept ``RECENT_SECONDS``."""

    def __init__(self, keep: float = RECENT_SECONDS, clock: Any = time.monotonic) -> None:
        self.keep = keep
        self.clock = clock
        self._docs: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()

    def put(self, key: str, doc: dict[str, Any]) -> None:
        self._docs[key] = (self.clock(), doc)
        self._docs.move_to_end(key)
        self._expire()

    def get(self, key: str) -> dict[str, Any] | None:
        self._expire()
        entry = self._docs.get(key)
        return None if entry is None else entry[1]

    def all(self) -> list[dict[str, Any]]:
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
        self._session = session(PER_WORKER_CONNECTIONS, ssl=tls)
        self._clients: dict[str, WorkerClient] = {}
        self._locations: OrderedDict[str, str] = OrderedDict()  # machine/volume id -> worker
        self.machines = Recent()
        self.volumes = Recent()
        self.index = MachineIndex()

    def load(self) -> None:
        """Index every machine the view knows (at start, and after losing the change feed)."""
        for doc in self.catalog.rows("machines"):
            self.index.note(doc)

    def on_machine(self, machine_id: str) -> dict[str, Any] | None:
        """The view's row for a machine changed; returns the row (None: it is gone)."""
        doc = self.catalog.get("machines", machine_id)
        if doc is None:
            self.index.forget(machine_id)
        else:
            self.index.note(doc)
        return doc

    async def aclose(self) -> None:
        await self._session.close()

    def url_of(self, worker: str) -> str | None:
        candidate = self.candidates.get(worker)
        if candidate is not None:
            return candidate.url
        doc = self.catalog.get("workers", worker)
        return None if doc is None else str(doc.get("url") or "") or None

    def client(self, worker: str) -> WorkerClient:
        url = self.url_of(worker)
        if url is None:
            raise Unavailable(f"worker {worker} is not in the cluster view")
        client = self._clients.get(url)
        if client is None:
            client = WorkerClient(url, client=self._session, timeout=self.timeout)
            self._clients[url] = client
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
            doc = self.catalog.get(table, key)
            if doc is None or doc.get("app") != app:
                raise NotFound(f"{kind} not found: {key}")
            worker = str(doc["worker"])
            self.remember(key, worker)
        return worker

    def note(self, table: str, doc: dict[str, Any]) -> None:
        """Remember a doc a worker returned: where it lives, and for read-your-writes."""
        key = str(doc.get("id", ""))
        if not key:
            return
        if doc.get("worker"):
            self.remember(key, str(doc["worker"]))
        recent = self.machines if table == "machines" else self.volumes
        if not replaces(doc, recent.get(key)):
            return  # an answer that left the worker before one we already hold
        recent.put(key, doc)
        if table == "machines":
            self.index.note(doc)
