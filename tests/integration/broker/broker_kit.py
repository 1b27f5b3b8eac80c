"""A broker over real in-process workers (null driver) on loopback, with an in-memory view.

Brokers call workers over mutual TLS, each with an identity from the test CA
(``tests.tls_kit``), as in a cluster; a test calls a worker as a broker with
``TEST_CA.context()``.

The view is a ``MemoryCatalog`` that a publisher fills from the workers
themselves, the way their registry nodes do in a cluster. ``sync`` publishes
once; ``follow`` keeps publishing in the background (or not, to prove the
broker reads its own writes without it). Workers find each other (to send and
fetch snapshots) in the same view, as they would in their registry's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bodega.broker.config import BrokerConfig
from bodega.broker.daemon import Broker
from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.capacity import Totals
from bodega.model.rows import WorkerRow
from bodega.worker.api.render import machine_answer, volume_answer
from bodega.worker.config import WorkerConfig
from bodega.worker.core.snapshot_places import Place
from bodega.worker.daemon import Worker
from bodega.worker.store import queries, volume_queries
from tests.keyring_kit import SOURCE
from tests.tls_kit import SECRETS_KEY, TEST_CA

ADMIN = "admin-token"


def publish(catalog: MemoryCatalog, worker: Worker) -> None:
    snapshot = worker.ledger.snapshot()
    name = worker.config.name
    catalog.put("workers", name, {
        "name": name, "region": worker.config.region, "url": worker.url,
        "totals": snapshot.totals.doc(), "used": snapshot.used.doc(),
        "cordoned": snapshot.cordoned, "cordon_reason": snapshot.cordon_reason})
    for row in queries.list_machines(worker.store.db, include_destroyed=True):
        catalog.put("machines", row.id, machine_answer(row, worker=name).doc())
    for vol in volume_queries.list_volumes(worker.store.db, None, True):
        catalog.put("volumes", vol.id, volume_answer(vol, worker=name).doc())


@dataclass
class CatalogDirectory:
    """The other workers as a worker's registry would show them: the kit's view."""

    catalog: MemoryCatalog

    def places(self) -> list[Place]:
        return [Place(name=row.name, url=row.url, region=row.region, cordoned=row.cordoned)
                for row in self.catalog.rows(WorkerRow)]


@dataclass
class Cluster:
    tmp: Path
    catalog: MemoryCatalog = field(default_factory=MemoryCatalog)
    workers: list[Worker] = field(default_factory=list)
    brokers: list[Broker] = field(default_factory=list)
    client: httpx.AsyncClient | None = None
    _follow: asyncio.Task[None] | None = None

    async def add_worker(self, name: str, region: str = "ams", cpus: int = 8,
                         memory_mb: int = 32768, disk_gb: int = 100) -> Worker:
        config = WorkerConfig(
            name=name, region=region, data_dir=self.tmp / name, driver="null",
            totals=Totals(cpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb),
            network="host", machine_user=None, gossip_keyring=SOURCE,
            tls_dir=TEST_CA.issue(self.tmp / name / "tls", "worker", name))
        worker = Worker(config)
        await worker.start()
        worker.copies.directory = CatalogDirectory(self.catalog)
        self.workers.append(worker)
        self.sync()
        return worker

    async def add_broker(self, catalog: MemoryCatalog | None = None,
                         **overrides: Any) -> Broker:
        """A broker on the shared view, or on ``catalog`` (a view gossip has not reached)."""
        name = str(overrides.get("name", f"broker-{len(self.brokers)}"))
        values: dict[str, Any] = {"name": name,
                                  "data_dir": self.tmp / "broker", "gossip_keyring": SOURCE,
                                  "secrets_key": SECRETS_KEY, "admin_tokens": (ADMIN,),
                                  "region": "ams", "listen_port": 0,
                                  "tls_dir": TEST_CA.issue(self.tmp / f"{name}-tls", "broker",
                                                           name)}
        values.update(overrides)
        broker = Broker(BrokerConfig(**values), catalog=catalog or self.catalog)
        await broker.start()
        self.brokers.append(broker)
        return broker

    def sync(self) -> None:
        for worker in self.workers:
            publish(self.catalog, worker)

    def follow(self, interval: float = 0.05) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval)
                self.sync()
        self._follow = asyncio.create_task(loop())

    def api(self, broker: int = 0, token: str | None = ADMIN) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.brokers[broker].url, headers=headers,
                                 timeout=30)

    async def close(self) -> None:
        if self._follow is not None:
            self._follow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follow
        for broker in self.brokers:
            await broker.stop()
        for worker in self.workers:
            await worker.stop()


@contextlib.asynccontextmanager
async def in_process_cluster(tmp: Path) -> AsyncIterator[Cluster]:
    """Brokers and workers as objects in the test's event loop; add them with ``add_*``."""
    c = Cluster(tmp)
    try:
        yield c
    finally:
        await c.close()


MACHINE = {"image": "registry.local/app:1", "guest": {"cpu_kind": "shared", "cpus": 1,
                                                     "memory_mb": 256}}


def machine(**extra: Any) -> dict[str, Any]:
    return {"config": {**MACHINE, **extra.pop("config", {})}, **extra}
