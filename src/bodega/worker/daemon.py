"""A running worker: wires the store, ledger, driver, network, services and API.

``Worker.start`` opens the store, sets up the host network, recovers (resumes
unfinished operations, re-adopts running machines) and only then serves, so
no request ever sees a half-recovered worker.

``Worker.stop`` with ``stop_machines_on_exit`` (what ``bodega up`` asks) leaves
nothing on the host: once its machines are stopped it sweeps every kernel object
it made (all named with its cluster id); their next start wires them again.
Without it, machines keep running for the next start to re-adopt, and only spare
namespaces are unwired. A worker killed with SIGKILL removes nothing, so its
machines live on and are re-adopted. Its batch jobs are ``job_wiring.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

from bodega.model.states import MachineState
from bodega.registry import RegistryConfig, RegistryNode
from bodega.runtime.keys import internal_token
from bodega.runtime.lifecycle import private_dir
from bodega.runtime.pid_lock import PidLock
from bodega.runtime.secretbox import SecretBox
from bodega.runtime.serve import Served, bind, serve
from bodega.wire.worker_calls import HostTotals, WorkerInfo
from bodega.worker.api.server import WorkerApi
from bodega.worker.config import WorkerConfig
from bodega.worker.core.records import MachineRow
from bodega.worker.drivers.base import Driver
from bodega.worker.host.network import Network
from bodega.worker.host.parts import make_driver, make_network, owner
from bodega.worker.host.secret_env import SecretEnv
from bodega.worker.host.survey import survey
from bodega.worker.host.sweep import owned, remove
from bodega.worker.job_wiring import WorkerJobs
from bodega.worker.metrics import WorkerMetrics
from bodega.worker.ops.actions import MachineActions
from bodega.worker.ops.effects import MachineEffects, machine_user
from bodega.worker.ops.health import HealthChecks
from bodega.worker.ops.lifecycle import Recorder
from bodega.worker.ops.machines import MachineService
from bodega.worker.ops.runner import Runner
from bodega.worker.ops.snapshots import VolumeSnapshots
from bodega.worker.ops.spares import wanted, wire_ahead
from bodega.worker.ops.volumes import VolumeService
from bodega.worker.ops.watch import StateWatch
from bodega.worker.publish import Publisher
from bodega.worker.store import queries
from bodega.worker.store.database import Store
from bodega.worker.store.ledger import Ledger

log = logging.getLogger("bodega.worker")

HOUSEKEEPING_INTERVAL = 2.0
COMPACTION_INTERVAL = 3600.0
# A suspended machine's frozen process runs on the host too: stopping "every machine"
# stops it (thawed first) rather than leave it frozen with no worker.
RUNNING = frozenset({MachineState.STARTED, MachineState.SUSPENDED})
STOP_ROUNDS = 3  # stop_all_machines: a round stops what the one before let finish starting


class Worker:
    def __init__(self, config: WorkerConfig, driver: Driver | None = None,
                 network: Network | None = None) -> None:
        self.config = config
        self.driver = driver or make_driver(config)
        self.network = network or make_network(config, self.driver)
        self.metrics = WorkerMetrics()
        self.watch = StateWatch()
        self.store = Store(config.store_path, fsync=config.fsync)
        self.store.on_commit(self.watch.notify)  # every committed change wakes its waiters
        self.ledger = Ledger(self.store, config.totals, config.reservation_ttl)
        if (images := self.driver.capabilities.images) is not None:
            self.ledger.image_disk_gb = images.disk_gb
        self.user = machine_user(config.machine_user)
        self.effects = MachineEffects(config, self.store, self.driver, self.network, self.user)
        recorder = Recorder(self.store, self.ledger)
        self.runner = Runner(self.store, self.effects, recorder, config.failpoints,
                             on_step=self.metrics.observe_step)
        self.machines = MachineService(self.store, self.ledger, self.runner, self.effects,
                                       self.network.index_range, recorder, worker=config.name)
        self.actions = MachineActions(self.machines, self.watch)
        self.volumes = VolumeService(self.store, self.ledger, self.runner)
        self.snapshots = VolumeSnapshots(self.volumes, self.machines, config.volume_dir,
                                         config.snapshot_dir)
        self.token = internal_token(config.cluster_secret)
        # Before recovery: a task's machine that ended while the worker was down is seen.
        self.jobs = WorkerJobs(config, self.machines, self.ledger, self.token)
        self.served: Served | None = None
        self.registry: RegistryNode | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._lock: PidLock | None = None
        self._next_compaction = 0.0
        self.machines.on_exit_decision = lambda d: self.metrics.exits.labels(d).inc()

    @property
    def url(self) -> str:
        if self.served is None:
            raise RuntimeError("worker is not serving")
        return f"http://{self.config.host()}:{self.served.port}"

    @property
    def gossip(self) -> str:
        """The registry's advertised gossip address, ``host:port``, for others to join through."""
        if self.registry is None:
            raise RuntimeError("worker is not started")
        host, port = self.registry.gossip_addr
        return f"{host}:{port}"

    def info(self) -> WorkerInfo:
        return WorkerInfo(
            name=self.config.name, region=self.config.region, driver=self.driver.name,
            url=self.url if self.served else None,
            totals=HostTotals.model_validate(self.config.totals.to_wire()), pid=os.getpid())

    def service_host(self, row: MachineRow) -> str | None:
        return self.network.service_host(row.private_ip)

    async def start(self) -> None:
        private_dir(self.config.data_dir)
        self._lock = PidLock.take(self.config.lock_path,
                                  f"another worker runs on data dir {self.config.data_dir}")
        for path in (self.config.machines_dir, self.config.volumes_dir):
            path.mkdir(parents=True, exist_ok=True)
        await self.network.setup()
        parking = self.driver.capabilities.parking
        if parking is not None:
            parking.reap()  # launchers a previous run left waiting: they would never be told to run
        await self.machines.recover()
        await self.snapshots.recover()  # after the machines: it thaws a started one
        api = WorkerApi(
            name=self.config.name, region=self.config.region, token=self.token,
            ledger=self.ledger, machines=self.machines, actions=self.actions,
            volumes=self.volumes, snapshots=self.snapshots, metrics=self.metrics, info=self.info,
            service_host=self.service_host, before_scrape=self._update_gauges,
            more=(self.jobs.routes,))
        sock = bind(self.config.listen_host, self.config.listen_port)
        url = f"http://{self.config.host()}:{sock.getsockname()[1]}"
        app = api.app()
        if self.config.gossip:
            self.registry = self._registry(url)
            self.effects.secret_env = SecretEnv(self.registry,
                                                SecretBox(self.config.cluster_secret))
            app.router.routes.extend(self.registry.routes())  # sync and subscriptions
        self.served = await serve(app, self.config.listen_host, self.config.listen_port, sock=sock)
        if self.registry is not None:
            await self.registry.start()
            publisher = Publisher(
                self.registry, name=self.config.name, region=self.config.region, url=url,
                driver=self.driver.name, store=self.store, ledger=self.ledger,
                service_host=self.service_host, destroyed_ttl=self.config.tombstone_ttl,
                images=images.held if (images := self.driver.capabilities.images) else None,
                after_drives=self.machines.lifecycle.after_drives)
            publisher.publish_all()  # the replica may be behind the store (or ahead of it)
            self._tasks.append(asyncio.create_task(publisher.run()))
            self.jobs.attach(self.registry)
        self.jobs.start()
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        self._tasks.append(asyncio.create_task(HealthChecks(
            self.store, self.machines, self.metrics, self.service_host).run()))
        self._tasks.append(asyncio.create_task(wire_ahead(
            self.network, wanted(self.network, self.store), self.machines.lifecycle,
            self.driver)))
        logs = self.driver.capabilities.logs
        if logs is not None:
            self._tasks.append(asyncio.create_task(logs.run(self.config.machines_dir)))
        log.info("worker %s (%s, %s driver) serving on %s", self.config.name,
                 self.config.region, self.driver.name, self.url)

    def _registry(self, url: str) -> RegistryNode:
        c = self.config
        return RegistryNode(RegistryConfig(
            name=c.name, role="worker", region=c.region, data_dir=c.registry_dir,
            cluster_secret=c.cluster_secret, bind_host=c.gossip_host or c.listen_host,
            bind_port=c.gossip_port, advertise_host=c.advertise_host, seeds=c.join,
            meta={"url": url}, tombstone_ttl=c.tombstone_ttl,
        ), registry=self.metrics.registry)

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL)
            try:
                now = self.store.clock()
                self.ledger.purge(now - 60)
                if now >= self._next_compaction:
                    self._next_compaction = now + COMPACTION_INTERVAL
                    dropped = self.store.compact(now - self.config.log_keep_seconds)
                    if dropped:
                        log.info("compacted the log: %d old step records dropped", dropped)
            except Exception:
                log.exception("housekeeping failed")

    def _update_gauges(self) -> None:
        """Machine counts and capacity, computed when scraped rather than on a timer."""
        counts = queries.count_by_state(self.store.db)
        for state in MachineState:
            self.metrics.machines.labels(str(state)).set(counts.get(state, 0))
        used = self.ledger.usage()
        totals = self.config.totals
        for name, value, total in (("millicpus", used.millicpus, totals.millicpus),
                                   ("memory_mb", used.memory_mb, totals.memory_mb),
                                   ("disk_gb", used.disk_gb, totals.disk_gb)):
            self.metrics.used.labels(name).set(value)
            self.metrics.total.labels(name).set(total)

    async def stop(self) -> None:
        """Stop serving; with ``stop_machines_on_exit`` also stop every running machine."""
        if self.served is not None:
            await self.served.stop()
        await self.jobs.stop()  # tasks stopped from here on are given back, not failed
        if self.config.stop_machines_on_exit:
            await self.stop_all_machines()
        await self.machines.settle()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.registry is not None:
            await self.registry.stop(leave=True)  # others see "left", not a failure
        parking = self.driver.capabilities.parking
        if parking is not None:
            parking.close()
        if self.config.stop_machines_on_exit:
            await self.sweep()
        else:  # machines run on, for the next start to re-adopt
            in_use = {row.ip_index for row in queries.list_machines(self.store.db)
                      if row.ip_index is not None}
            await self.network.release_spares(in_use)
        await self.machines.supervision.close()
        await self.jobs.close()
        self.store.close()
        if self._lock is not None:
            self._lock.release()

    async def sweep(self) -> None:
        """Remove every kernel object this worker made: nothing of it outlives it."""
        mine = owner(self.config)
        leftovers = owned(survey(), mine, self.config.data_dir) if mine is not None else None
        if not leftovers:
            return
        problems = await remove(leftovers)
        log.info("removed %d kernel objects of this worker", leftovers.count() - len(problems))
        for problem in problems:
            log.warning("could not remove %s", problem)

    async def stop_all_machines(self) -> None:
        """Stop every started (or suspended) machine, leased or not; let none start again.

        Exits seen from now on are not restarted (``drain``); a start already under way (a
        crash loop's, its backoff cut short) is let finish and its machine stopped next round.
        """
        self.machines.drain()
        for _ in range(STOP_ROUNDS):
            await self.machines.settle()
            rows = [r for r in queries.list_machines(self.store.db) if r.state in RUNNING]
            if not rows:
                return
            log.info("stopping %d machines before exit", len(rows))
            results = await asyncio.gather(
                *(self.machines.stop(row.id, timeout=5.0, lease_override=True) for row in rows),
                return_exceptions=True,
            )
            for row, result in zip(rows, results, strict=True):
                if isinstance(result, Exception):
                    log.warning("%s: could not stop: %s", row.id, result)
        await self.machines.settle()
        left = [r.id for r in queries.list_machines(self.store.db) if r.state in RUNNING]
        if left:
            log.warning("still started after %d rounds of stops: %s", STOP_ROUNDS,
                        ", ".join(left))
