"""A running worker: wires the store, ledger, driver, network, services and API.

``Worker.start`` opens the store, sets up the host network, recovers (resumes
unfinished operations, re-adopts running machines) and only then serves, so
no request ever sees a half-recovered worker.

``Worker.stop`` is told why it stops (``StopCause``). Stopped for a cause its
config's ``stop_machines_on`` names (SIGINT under ``bodega up`` and ``bodega
join``: Ctrl-C), it stops its machines, publishes their last state before it
says goodbye (so the cluster shows them stopped, not running on a host that
left) and leaves nothing on the host: it sweeps every kernel object it made
(all named with its cluster id); their next start wires them again. Those it
stopped while started are marked so, and start again when the worker does
(``core/policy.py``, ``comes_back``), as do those whose runs it finds killed with
the host.
Otherwise (SIGTERM under a supervisor: an upgrade, systemd's stop; or its
supervisor gone), machines keep running for the next start to re-adopt, and
only spare namespaces are unwired; with none running (all at rest, or none at
all: a start that failed elsewhere), it sweeps as above, so a cluster that never
comes back leaves no bridge holding its subnet. A worker killed with SIGKILL removes nothing,
so its machines live on and are re-adopted. Its batch jobs are ``jobs/wiring.py``'s. With
``private_network`` it also runs this host's part of the private network
(``host/private_net.py``) once its registry node runs.

The module is long because it is the worker's one composition root: every wing
(store, ledger, driver, network, machines, volumes and their snapshots' copies, jobs,
figures, the API) is built, started in recovery order and stopped in reverse here,
and each wing's own logic lives in its package.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bodega.model.rows.apps import org_reader
from bodega.model.states import MachineState
from bodega.registry import Registry, RegistryConfig, open_registry
from bodega.registry.agent.member_tls import certificate_meta, renewal
from bodega.registry.sealing import keyfile
from bodega.runtime.lifecycle import StopCause, private_dir
from bodega.runtime.pid_lock import PidLock
from bodega.runtime.secretbox import SecretBox
from bodega.runtime.serve import Served, bind, serve
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.core.access import WORKER_API
from bodega.runtime.tls.files import TlsDir
from bodega.runtime.waits import within
from bodega.wire.internal.worker_calls import WorkerInfo
from bodega.wire.transport.peer_access import PeerAccess
from bodega.worker.api.server import WorkerApi
from bodega.worker.config import WorkerConfig
from bodega.worker.core.records import MachineRow
from bodega.worker.core.snapshot_places import Place
from bodega.worker.drivers.base import Driver
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.vm import arrivals
from bodega.worker.host.core.identity import machine_home
from bodega.worker.host.image_drivers import advertised_registries, registry_sources
from bodega.worker.host.network import Network
from bodega.worker.host.parts import (
    images_off,
    limits_notice,
    make_driver,
    make_fence,
    make_network,
    make_private_network,
    owner,
    swap_notice,
)
from bodega.worker.host.peer_routes import PeerRoutes
from bodega.worker.host.secret_env import SecretEnv
from bodega.worker.host.survey import survey
from bodega.worker.host.sweep import owned, remove
from bodega.worker.host.usage import UsageReader
from bodega.worker.jobs.wiring import WorkerJobs
from bodega.worker.metrics import WorkerMetrics
from bodega.worker.ops.actions import MachineActions
from bodega.worker.ops.effects import MachineEffects, machine_user
from bodega.worker.ops.figures import MachineFigures
from bodega.worker.ops.health import HealthChecks
from bodega.worker.ops.lifecycle import Recorder
from bodega.worker.ops.machines import MachineService
from bodega.worker.ops.moves import MachineMoves
from bodega.worker.ops.runner import Runner
from bodega.worker.ops.snapshot_copies import SnapshotCopies, ViewDirectory
from bodega.worker.ops.snapshots import VolumeSnapshots
from bodega.worker.ops.volumes import VolumeService
from bodega.worker.ops.watch import StateWatch
from bodega.worker.publish import Publisher
from bodega.worker.store import queries
from bodega.worker.store.database import Store
from bodega.worker.store.ledger import Ledger
from bodega.worker.upkeep import StoredSpares, housekeeping, wire_ahead

log = logging.getLogger("bodega.worker")

HOLD_BACK = 120.0  # seconds a live move's arrival is kept from the view at most

ABANDON_WAIT = 5.0  # seconds each close after a failed start may take

# A suspended machine's frozen process runs on the host too: "every machine" includes it.
RUNNING = frozenset({MachineState.STARTED, MachineState.SUSPENDED})
# No process of a machine in these runs: a worker whose machines all are leaves nothing behind.
AT_REST = frozenset({MachineState.CREATED, MachineState.STOPPED, MachineState.FAILED,
                     MachineState.LAUNCH_FAILED, MachineState.REPLACED})
STOP_ROUNDS = 3  # stop_all_machines: a round stops what the one before let finish starting


class Worker:
    def __init__(self, config: WorkerConfig, driver: Driver | None = None,
                 network: Network | None = None) -> None:
        self.config = config
        self.image_sources = registry_sources(config)  # the view attached once it is read
        self.driver = driver or make_driver(config, self.image_sources)
        self.network = network or make_network(config, self.driver)
        # What this host cannot do, said once at start and in the ready file (so `bodega up`
        # and `bodega join` print it), and published for placement.
        self.notices = [notice for notice in (limits_notice(config), swap_notice(config))
                        if notice is not None]
        runs_images = (self.driver.capabilities.images is not None
                       or self.driver.name in ("null", "fake"))
        self.images_off = None if runs_images else (
            images_off(config) or f"the worker runs the {self.driver.name} driver only")
        # A sandbox runs in the machine's own network namespace (runsc takes it for the
        # host's): where machines have none, the worker offers none.
        isolations = tuple(i for i in self.driver.capabilities.isolations
                           if i == "container" or self.network.fixed_attachment() is None)
        vm_accel = self.driver.capabilities.vm_accel if "vm" in isolations else ""
        config = self.config = replace(config, totals=replace(
            config.totals, isolations=isolations, vm_accel=vm_accel))
        self.metrics = WorkerMetrics()
        self.watch = StateWatch()
        self.store = Store(config.store_path, fsync=config.fsync)
        self.store.on_commit(self.watch.notify)  # every committed change wakes its waiters
        self.ledger = Ledger(self.store, config.totals, config.reservation_ttl)
        if (images := self.driver.capabilities.images) is not None:
            self.ledger.image_disk_gb = images.disk_gb
        self.user = machine_user(config.machine_user)
        self.effects = MachineEffects(config, self.store, self.driver, self.network, self.user)
        self.private = self.effects.private = make_private_network(config, self.network)
        self.fence = self.effects.fence = make_fence(config, self.network)
        recorder = Recorder(self.store, self.ledger)
        self.runner = Runner(self.store, self.effects, recorder, config.failpoints,
                             on_step=self.metrics.observe_step)
        self.machines = MachineService(self.store, self.ledger, self.runner, self.effects,
                                       self.network.index_range, recorder, worker=config.name)
        self.actions = MachineActions(self.machines, self.watch)
        self.volumes = VolumeService(self.store, self.ledger, self.runner)
        self.snapshots = VolumeSnapshots(self.volumes, self.machines, config.volume_dir,
                                         config.snapshot_dir)
        self.tls = (InternalTls(TlsDir(config.tls_dir), self.metrics.registry)
                    if config.tls_dir is not None else None)
        settings = config.snapshots
        self.copies = SnapshotCopies(
            self.snapshots, self._place, self.tls.client if self.tls is not None else None,
            config.snapshots_dir / ".transfers", copies=settings.copies,
            schedule_every=settings.every, upkeep_every=settings.upkeep)
        self.moves = MachineMoves(self.machines, config.name, config.region, self.tls)
        # Before recovery: a task's machine that ended while the worker was down is seen.
        self.jobs = WorkerJobs(config, self.machines, self.ledger, self.tls, self._home)
        self.served: Served | None = None
        self.registry: Registry | None = None
        self.publisher: Publisher | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._lock: PidLock | None = None
        self.machines.on_exit_decision = lambda d: self.metrics.exits.labels(d).inc()
        self._register_figures()

    def _register_figures(self) -> None:
        """Every started machine's ``fly_instance_*`` series, where machines have cgroups."""
        cgroups = (Cgroups.detect(self.config.cgroup_scope())
                   if self.config.cgroups and self.driver.capabilities.memory is not None
                   else None)
        if cgroups is None:
            return
        self.metrics.registry.register(MachineFigures(
            lambda: queries.started_figures_rows(self.store.db), UsageReader(cgroups),
            self.config.name, lambda app: org_reader(self.registry)(app)))

    @property
    def url(self) -> str:
        if self.served is None:
            raise RuntimeError("worker is not serving")
        return self._url(self.served.port)

    def _url(self, port: int) -> str:
        return f"{'https' if self.tls else 'http'}://{self.config.host()}:{port}"

    @property
    def gossip(self) -> str:
        """The registry's advertised gossip address, ``host:port``, for others to join through."""
        if self.registry is None:
            raise RuntimeError("worker is not started")
        return "{}:{}".format(*self.registry.gossip_addr)

    def info(self) -> WorkerInfo:
        return WorkerInfo(
            name=self.config.name, region=self.config.region, driver=self.driver.name,
            url=self.url if self.served else None,
            totals=self.config.totals.row(), pid=os.getpid())

    def _place(self) -> Place:
        """This worker as its snapshots' copies are placed from (``core/snapshot_places``)."""
        return Place(name=self.config.name, url=self.url if self.served else "",
                     region=self.config.region)

    def _home(self, machine_id: str, private_ip: str | None) -> Path | None:
        return machine_home(self.user, self.config.machine_dir(machine_id), private_ip)

    def arriving_live(self, row: MachineRow) -> bool:
        """Whether ``row``'s VM waits here for a live move's state, staged less than
        ``HOLD_BACK`` ago: the source serves it meanwhile. Past that, the view names this
        worker whatever the move's state, so that a machine whose source was lost
        mid-move can be found, and restarted, here."""
        return arrivals.staged_within(self.config.machine_dir(row.id), HOLD_BACK)

    def service_host(self, row: MachineRow) -> str | None:
        return self.network.service_host(row.private_ip)

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self._abandon_start()
            raise

    async def _abandon_start(self) -> None:
        """Close what a start that failed half way opened (its listener, its link to the
        registry agent), so the process ends with its one error line and nothing after it.
        Machines and kernel objects stay, as after any stop: the next start takes them up."""
        for closing in (self.served.stop if self.served is not None else None,
                        self.registry.stop if self.registry is not None else None,
                        self.jobs.close_door):
            if closing is None:
                continue
            try:  # bounded: a close that hangs must not keep the error from being told
                await within(closing(), ABANDON_WAIT)
            except Exception:  # the start's own error is the one to tell
                log.debug("closing after a failed start", exc_info=True)

    async def _start(self) -> None:
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
        self.copies.recover()  # after it: a partial tree left is a transfer's
        api = WorkerApi(
            name=self.config.name, region=self.config.region,
            access=PeerAccess(WORKER_API, self.tls),
            ledger=self.ledger, machines=self.machines, actions=self.actions,
            volumes=self.volumes, copies=self.copies, metrics=self.metrics, info=self.info,
            service_host=self.service_host, before_scrape=self._before_scrape,
            more=(self.jobs.routes,), moves=self.moves)
        sock = bind(self.config.listen_host, self.config.listen_port)
        url = self._url(sock.getsockname()[1])
        app = api.app()
        if self.config.gossip:
            self.registry = await self._registry(url)
            self.moves.registry = self.registry  # where a move's target serves now
            if self.config.secrets_key:
                self.effects.secret_env = SecretEnv(self.registry,
                                                    SecretBox(self.config.secrets_key))
            app.router.routes.extend(self.registry.routes())  # sync and subscriptions
        self.served = await serve(app, self.config.listen_host, self.config.listen_port, sock=sock,
                                  tls=self.tls)
        if self.registry is not None:
            await self.registry.start()
            if self.private is not None:  # (machines running since before a restart, too)
                await self.private.start(self.registry, queries.list_machines(self.store.db))
        if self.fence is not None:
            await self.fence.start(self.registry, queries.list_machines(self.store.db))
        jobs_url = await self.jobs.open_door()
        if self.registry is not None:
            if self.tls is not None:
                self._tasks.append(asyncio.create_task(renewal(self.tls, self.registry).run()))
            subnet: str | None = getattr(self.network, "routed_subnet", None)  # netns only
            publisher = self.publisher = Publisher(
                self.registry, name=self.config.name, region=self.config.region, url=url,
                driver=self.driver.name, images_off=self.images_off,
                store=self.store, ledger=self.ledger,
                service_host=self.service_host, destroyed_ttl=self.config.tombstone_ttl,
                images=images.held if (images := self.driver.capabilities.images) else None,
                subnet=subnet,
                machine_extra=self.private.published if self.private else None,
                overlay=self.private.advertised if self.private else None,
                after_drives=self.machines.lifecycle.after_drives,
                image_registry=(self.config.image_registry if self.config.image_registry_here
                                else None),
                held_back=self.arriving_live, jobs_url=jobs_url)
            view = self.registry
            self.image_sources.attach(lambda: advertised_registries(view))
            publisher.publish_all()  # the replica may be behind the store (or ahead of it)
            self._tasks.append(asyncio.create_task(publisher.run()))
            if subnet is not None:  # machines on other hosts reach this one's, and back
                routes = PeerRoutes(self.registry, self.config.host())
                self._tasks.append(asyncio.create_task(routes.run()))
            self.jobs.attach(self.registry)
            self.copies.directory = ViewDirectory(self.registry)
        self.jobs.start()
        self._tasks.append(asyncio.create_task(self.copies.run()))
        self._tasks.append(asyncio.create_task(housekeeping(
            self.store, self.ledger, self.config.log_keep_seconds)))
        self._tasks.append(asyncio.create_task(HealthChecks(
            self.store, self.machines, self.metrics, self.service_host).run()))
        self._tasks.append(asyncio.create_task(wire_ahead(
            self.network, StoredSpares(self.network, self.store, self._home),
            self.machines.lifecycle, self.driver)))
        logs = self.driver.capabilities.logs
        if logs is not None:
            self._tasks.append(asyncio.create_task(logs.run(self.config.machines_dir)))
        log.info("worker %s (%s, %s driver) serving on %s", self.config.name,
                 self.config.region, self.driver.name, self.url)
        for notice in self.notices:
            log.warning("%s", notice)

    async def _registry(self, url: str) -> Registry:
        c = self.config
        keys = keyfile.needed(c.gossip_keyring)
        return await open_registry(RegistryConfig(
            name=c.name, role="worker", region=c.region, data_dir=c.registry_dir,
            keyring=keys.keyring, keyring_file=keys.file,
            bind_host=c.gossip_host or c.listen_host,
            bind_port=c.gossip_port, advertise_host=c.advertise_host, seeds=c.join,
            meta={"url": url, **certificate_meta(self.tls)}, tombstone_ttl=c.tombstone_ttl,
        ), c.registry_agent, registry=self.metrics.registry, tls=self.tls)

    async def stop(self, cause: StopCause = StopCause.TERMINATE) -> None:
        """Stop serving; stop every running machine too when ``cause`` is one the config's
        ``stop_machines_on`` names, else leave them running for the next start."""
        machines_stop = cause in self.config.stop_machines_on
        if not machines_stop and self.config.stop_machines_on:
            log.info("machines stay running (%s): the next start re-adopts them", cause.value)
        if self.served is not None:
            await self.served.stop()
        await self.jobs.stop()  # tasks stopped from here on are given back, not failed
        if machines_stop:
            await self.stop_all_machines()
        await self.machines.settle()
        machines_stay = not machines_stop and any(
            r.state not in AT_REST for r in queries.list_machines(self.store.db))
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.registry is not None:
            self._publish_last()
            await self.registry.stop(leave=True)  # others see "left", not a failure
        parking = self.driver.capabilities.parking
        if parking is not None:
            parking.close()
        if self.private is not None:
            await self.private.stop(machines_stay=machines_stay)
        if self.fence is not None:
            await self.fence.stop(machines_stay=machines_stay)
        self.network.close()  # before a sweep deletes namespaces its sockets would hold
        if not machines_stay:  # none left running: nothing of this worker stays either
            await self.sweep()
        else:  # machines run on, for the next start to re-adopt
            in_use = {row.ip_index for row in queries.list_machines(self.store.db)
                      if row.ip_index is not None}
            await self.network.release_spares(in_use)
        await self.machines.supervision.close()
        await self.jobs.close()
        await self.copies.aclose()
        self.store.close()
        if self._lock is not None:
            self._lock.release()

    def _publish_last(self) -> None:
        """What the stop did (machines stopped, say), published before the goodbye: the
        publisher's loop is cancelled by then, and may not have ticked since."""
        if self.publisher is None:
            return
        try:
            self.publisher.tick(time.monotonic())
        except Exception:  # the next start republishes everything
            log.exception("publishing the machines' last state failed")

    def _before_scrape(self) -> None:
        self.metrics.observe_usage(queries.count_by_state(self.store.db), self.ledger.usage(),
                                   self.config.totals)
        if self.jobs.home.seats is not None:
            self.metrics.observe_starts_at_submit(self.jobs.home.seats.started)
        warmup = self.driver.capabilities.warmup
        if warmup is not None:
            self.metrics.observe_warmup(warmup.warmup_moves)

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
        """Stop every started (or suspended) machine, leased or not; let none start again:
        exits seen from now on are not restarted (``drain``); a start under way (a crash
        loop's, its backoff cut short) is let finish and its machine stopped next round."""
        self.machines.drain()
        for _ in range(STOP_ROUNDS):
            await self.machines.settle()
            rows = [r for r in queries.list_machines(self.store.db) if r.state in RUNNING]
            if not rows:
                return
            log.info("stopping %d machines before exit", len(rows))
            results = await asyncio.gather(
                *(self.machines.host_stop(row.id, timeout=5.0) for row in rows),
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
