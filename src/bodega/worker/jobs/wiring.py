"""The batch layer of a worker, wired: its jobs database, home, runner, routes and publisher.

Built with the worker (before its recovery, so that the exit of a task's
machine found at start-up is seen), attached to the registry once it runs
(other workers' URLs, who is alive, their room; the ``jobs`` rows it
publishes), started after it. ``docs/jobs.md`` says what each part does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bodega.jobs.binding import WorkerRoom
from bodega.jobs.homes import job_key, rendezvous
from bodega.jobs.passes import JobPasses
from bodega.model.errors import BodegaError
from bodega.model.rows import WorkerRow
from bodega.registry import Registry
from bodega.runtime.identity_keys import identity_keys
from bodega.runtime.serve import Served, serve
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.waits import within
from bodega.worker.config import WorkerConfig
from bodega.worker.jobs.door import JobDoor
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.own_calls import OwnCalls
from bodega.worker.jobs.peers import JobPeers
from bodega.worker.jobs.publish import JobPublisher
from bodega.worker.jobs.routes import JobRoutes
from bodega.worker.jobs.run_store import RunStore
from bodega.worker.jobs.runs import OWNER, JobRunner
from bodega.worker.jobs.schedules import calendar
from bodega.worker.jobs.seats import SubmitSeats
from bodega.worker.jobs.slots import SlotPool
from bodega.worker.jobs.store import JobStore
from bodega.worker.jobs.upkeep import JobUpkeep, UpkeepConfig
from bodega.worker.jobs.waits import JobWaits
from bodega.worker.jobs.watch import RunWatch
from bodega.worker.ops.machines import MachineService
from bodega.worker.store.ledger import Ledger

log = logging.getLogger("bodega.worker.jobs")

SYNC_EVERY = 0.05  # seconds from a commit not fsync'd to the fsync that makes it durable
HOMES_ASKED, ASK_WAIT = 3, 2.0  # a job's homes asked for its state, each for so long


class WorkerJobs:
    def __init__(self, config: WorkerConfig, machines: MachineService, ledger: Ledger,
                 tls: InternalTls | None,
                 home_of: Callable[[str, str | None], Path | None] | None = None) -> None:
        settings = config.jobs
        self.store = JobStore(config.data_dir / "jobs.db")
        self.home = JobHome(self.store, config.name, settings.queue_limit,
                            calendar=calendar(settings.clock_file))
        self.home.sync_submits = settings.sync_submits
        self.peers = JobPeers(config.name, tls.client if tls is not None else None,
                              self._url_of, self._alive, self._rooms)
        runs = RunStore(self.store)
        self.watch = RunWatch(runs, machines, self.peers, config.data_dir / "jobs" / "logs",
                              config.machine_dir, logs_ttl=settings.finished_ttl)
        # Built even with slots off: a worker started again with --no-warm-slots still
        # finds the slots it ran and ends their tasks.
        slots = SlotPool(runs, machines, OWNER, home_of,
                         enabled=settings.warm_slots) if home_of is not None else None
        self.runner = JobRunner(runs, machines, ledger, self.peers, self.watch,
                                slots)
        if slots is not None:
            self.watch.attach(slots)
            slots.freed = self._slot_freed
            ledger.giving_way = slots.giving_way  # idle slots' room shows as free,
            ledger.make_room = slots.make_room  # and is made free for any machine
            self.home.seats = SubmitSeats(runs, slots, config.name, self.watch.leased)
        self.upkeep = JobUpkeep(self.home, self.peers, UpkeepConfig(
            probe_ratio=settings.probe_ratio, finished_ttl=settings.finished_ttl,
            keep_per_app=settings.keep_per_app),
            JobWaits(self.home, self._viewed_state, self._asked_state), rng=random.Random())
        self.routes = JobRoutes(home=self.home, runner=self.runner)
        # The jobs door, for clients holding a pass: only with the key passes are checked by.
        self.door = JobDoor(self.home, JobPasses(identity_keys(
            config.secrets_key.encode()).job_pass), self) \
            if config.secrets_key and settings.door_port is not None else None
        self._door_at = (config.listen_host, settings.door_port or 0, config.host())
        self._door_served: Served | None = None
        self.peers.own = OwnCalls(self.home, self.runner)
        self.registry: Registry | None = None
        self.publisher: JobPublisher | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self.home.changed = self._changed

    def _slot_freed(self) -> None:
        """A slot may have come free: this home's queued one-task jobs first, then the
        runner's probes (other homes' tasks, and this one's of many tasks)."""
        try:
            self.home.seat_queued()
        except Exception:  # a full disk: the runner's takes find them as before
            log.exception("starting queued jobs in free slots failed")
        self.runner.wake.set()

    def _changed(self, job_id: str) -> None:
        if self.publisher is not None:
            self.publisher.mark(job_id)
        self.upkeep.wake.set()

    # -- the view ---------------------------------------------------------------------------
    def _viewed(self, app: str, name: str, field: str) -> str | None:
        """``field`` of job ``name`` of ``app`` in the view (its newest row, if several)."""
        if self.registry is None:
            return None
        rows = sorted(self.registry.rows("jobs", app=app, name=name),
                      key=lambda doc: str(doc.get("id")))
        return str(rows[-1].get(field)) if rows else None

    def _viewed_state(self, app: str, name: str) -> str | None:
        return self._viewed(app, name, "state")

    async def _asked_state(self, app: str, name: str) -> str | None:
        """The state of job ``name`` of ``app`` as its home says (the first of its rendezvous
        order that has it), for a job only its home keeps; None if none answers with it."""
        for home in rendezvous(job_key(app, name), self.live_workers())[:HOMES_ASKED]:
            if home == self.home.name:
                continue
            try:
                return (await within(self.peers.client(home).find_job(app, name),
                                     ASK_WAIT)).state
            except (BodegaError, TimeoutError):
                continue
        return None

    def home_named(self, app: str, name: str) -> str | None:
        return self._viewed(app, name, "home")

    def live_workers(self) -> list[str]:
        """The workers of the view that are alive (members of other roles left out)."""
        if self.registry is None:
            return []
        live = self._statuses()
        return [name for doc in self.registry.rows(WorkerRow.TABLE)
                if live.get(name := str(doc.get("name")), False)]

    def _url_of(self, worker: str) -> str | None:
        row = self.registry.get(WorkerRow, worker) if self.registry is not None else None
        return row.url if row is not None and row.url else None

    def _statuses(self) -> dict[str, bool]:
        if self.registry is None:
            return {}
        return {m.name: m.status.live for m in self.registry.members()}

    def _alive(self, worker: str) -> bool:
        return self._statuses().get(worker, False)

    def _rooms(self) -> list[WorkerRoom]:
        if self.registry is None:
            return []
        live = self._statuses()
        rooms = []
        for row in self.registry.rows(WorkerRow):
            rooms.append(WorkerRoom(
                name=row.name, alive=live.get(row.name, False), cordoned=row.cordoned,
                free_millicpus=row.free.millicpus if row.free is not None else 0,
                free_memory_mb=row.free.memory_mb if row.free is not None else 0,
                region=row.region))
        return rooms

    # -- lifecycle --------------------------------------------------------------------------
    def attach(self, registry: Registry) -> None:
        self.registry = registry
        self.publisher = JobPublisher(registry, self.home)

    async def open_door(self) -> str | None:
        """Serve the jobs door (``door.py``); its URL, or None for a worker with none."""
        if self.door is None:
            return None
        host, port, advertised = self._door_at
        self._door_served = await serve(self.door.app(), host, port)
        return f"http://{advertised}:{self._door_served.port}"

    def start(self) -> None:
        self.upkeep.resumed()
        if self.publisher is not None:
            self.publisher.publish_all()
            self._tasks.append(asyncio.create_task(self.publisher.run()))
        self._tasks += [asyncio.create_task(self._sync_wal()),
                        asyncio.create_task(self.upkeep.run()),
                        asyncio.create_task(self.runner.run()),
                        asyncio.create_task(self.watch.run())]

    async def _sync_wal(self) -> None:
        """fsync the jobs database's WAL within ``SYNC_EVERY`` of a commit that was not: one
        fsync for every commit since the last, off the event loop."""
        while True:
            await asyncio.sleep(SYNC_EVERY)
            if self.store.unsynced:
                self.store.unsynced = False
                try:
                    await asyncio.to_thread(self.store.sync)
                except OSError as exc:
                    self.store.unsynced = True  # tried again at the next round
                    log.warning("syncing the jobs database failed: %s", exc)

    async def close_door(self) -> None:
        if self._door_served is not None:
            await self._door_served.stop()
            self._door_served = None

    async def stop(self) -> None:
        await self.close_door()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.runner.close()
        if self.runner.slots is not None:
            await self.runner.slots.close()
        await self.watch.close()
        await self.upkeep.close()
        if self.publisher is not None:
            with contextlib.suppress(Exception):
                self.publisher.flush(everything=True)
        with contextlib.suppress(OSError):
            self.store.sync()

    async def close(self) -> None:
        await self.peers.aclose()
        self.store.close()
