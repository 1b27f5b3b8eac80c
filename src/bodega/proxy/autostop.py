"""Putting idle machines to sleep, and waking standbys when a worker dies.

Autostop runs every ``interval``: for each app, in this proxy's region, it
stops at most one idle machine whose service has ``autostop`` (see
``balance.autostop_victim``), keeping ``min_machines_running`` when this
region is the app's primary region (``PRIMARY_REGION`` in the machine's env,
as flyctl sets it; else this proxy's region). A stop uses the machine's
``stop_config``: the worker applies it. With ``autostop = "suspend"`` the
machine is suspended instead (frozen, memory kept; the next request's start
resumes it); one its worker cannot suspend (400) or that Fly's rules refuse
(412: too big, scheduled) is stopped, as Fly does.

Failover: when membership declares a worker dead, its machines leave the
routing table at once (they fail ``worker_alive``). If an app is left with
nothing that can serve, the proxy starts the standbys of the lost machines
(machines whose ``config.standbys`` names one), or else any stopped machine.
Nothing is created or moved: only machines prepared in advance are started.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from bodega.model.errors import BadRequest, BodegaError, PreconditionFailed
from bodega.proxy.core.balance import autostop_victim, usable, wake_candidate
from bodega.proxy.core.load import LoadView
from bodega.proxy.core.routes import Backend, RoutingTable
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.wake import Waker
from bodega.wire.internal.worker_client import WorkerClient

log = logging.getLogger("bodega.proxy.autostop")


class Machines(Protocol):
    """What autostop reads of the routes: ``RoutingTable``, or ``tcp_routes.AllServices``."""

    def apps(self) -> list[str]: ...

    def backends(self, app: str) -> list[Backend]: ...

    def worker_alive(self, name: str) -> bool: ...

    def mark_rested(self, machine_id: str, state: str) -> None: ...


class Autostop:
    def __init__(self, table: Machines, load: LoadView, clients: Callable[[str], WorkerClient |
                 None], metrics: ProxyMetrics, region: str, interval: float,
                 idle_for: float) -> None:
        self.table = table
        self.load = load
        self.clients = clients
        self.metrics = metrics
        self.region = region
        self.interval = interval
        self.idle_for = idle_for

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.tick()
            except Exception:
                log.exception("autostop pass failed")

    async def tick(self) -> list[Backend]:
        """One pass: at most one machine per app stopped in this region."""
        stopped = []
        now = time.monotonic()
        for app in self.table.apps():
            here = [b for b in self.table.backends(app) if b.region == self.region
                    and self.table.worker_alive(b.worker)]
            for b in here:
                self.load.seen(b.machine_id)
            primary = next((b.primary_region for b in here if b.primary_region), self.region)
            keep = max((b.min_running for b in here), default=0) if primary == self.region else 0
            victim = autostop_victim(here, self.load.outstanding, self.load.idle_since, now,
                                     self.idle_for, keep)
            if victim is not None and await self._stop(victim):
                stopped.append(victim)
        return stopped

    async def _stop(self, backend: Backend) -> bool:
        client = self.clients(backend.worker)
        if client is None:
            return False
        how = "stopped"
        try:
            if backend.autostop == "suspend" and await self._suspend(client, backend):
                how = "suspended"
            else:
                await client.stop(backend.machine_id)
        except BodegaError as exc:
            log.info("%s (%s): could not stop it: %s", backend.machine_id, backend.app,
                     exc.message)
            return False
        self.table.mark_rested(backend.machine_id, how)
        self.metrics.autostops.labels(backend.app).inc()
        log.info("%s (%s): idle; %s", backend.machine_id, backend.app, how)
        return True

    async def _suspend(self, client: WorkerClient, backend: Backend) -> bool:
        """Suspend it; False when it cannot be suspended (it is to be stopped instead)."""
        try:
            await client.suspend(backend.machine_id)
        except (BadRequest, PreconditionFailed) as exc:
            log.info("%s (%s): cannot be suspended (%s); stopping it", backend.machine_id,
                     backend.app, exc.message)
            return False
        return True


class Failover:
    def __init__(self, table: RoutingTable, waker: Waker, metrics: ProxyMetrics) -> None:
        self.table = table
        self.waker = waker
        self.metrics = metrics

    async def worker_lost(self, worker: str) -> list[Backend]:
        """Start standbys for apps a dead worker left with nothing to serve."""
        lost = list(self.table.on_worker(worker))
        started: list[Backend] = []
        for app in sorted({b.app for b in lost}):
            backends = self.table.backends(app)
            if any(usable(b, self.table.worker_alive) for b in backends):
                continue
            lost_ids = {b.machine_id for b in lost if b.app == app}
            standbys = [b for b in backends if set(b.standbys) & lost_ids
                        and self.table.worker_alive(b.worker) and b.state != "started"]
            if not standbys:
                fallback = wake_candidate(backends, self.waker.region, self.table.worker_alive)
                standbys = [fallback] if fallback is not None else []
            if not standbys:
                log.warning("%s lost every machine with worker %s and has no standby", app,
                            worker)
                continue
            log.info("%s lost worker %s: starting %s", app, worker,
                     ", ".join(b.machine_id for b in standbys))
            woken = await self.waker.start_all(standbys)
            self.metrics.failovers.labels(app).inc(len(woken))
            started += woken
        return started
