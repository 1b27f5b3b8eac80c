"""What this worker tells the cluster: its capacity, machines and volumes, in the registry.

The worker's ops log is the history of everything it does (ARCHITECTURE.md,
invariant 4), so the publisher follows the log rather than hooks (a commit
only wakes it): ``interval`` (50 ms) after a commit that logged something,
to gather the burst, it reads the entries appended since its last look,
re-renders each machine and volume they touched (and the volume attached to
a touched machine, whose attachment changes under the machine's operation),
and republishes the ``workers`` row: whenever the log moved, even if the
capacity reads as it did (a broker counts each create it placed until this
row comes, and a machine created and destroyed within one tick changes
nothing to see), and otherwise when the capacity it shows changed. A
burst of changes becomes one publish per resource per tick, and nothing that
changes the worker can be missed, since nothing changes it without a log
entry: reservations and cordons included, which no runner hook sees. A
reservation that simply expires writes no log entry, so the capacity is
also compared once a second. A worker with nothing to do wakes only for that.

A machine that arrives by a live move is not published here until its VM goes on
here (``held_back``: its qemu waits for the source's state): until then the
source's VM serves, and the view keeps routing to it. The switch logs the move's
event, and that entry publishes it; a machine held back is also looked at again at
each capacity refresh, so one whose hold ends without an entry (a source lost
mid-move: ``Worker.arriving_live``'s bound) is published within a second.

Rows are what the worker API returns for the same resource (``api/render.py``'s
``Machine`` and ``Volume``, as JSON documents), without events. Destroyed machines
and volumes stay as rows with state ``destroyed`` (clients list them with
``include_deleted``) until the tombstone TTL has passed, then become tombstones,
which the registry purges after another TTL. On start-up everything is
republished and rows the view holds for this worker that the worker no longer
has are deleted: the replica may be behind, or ahead of a store that lost its
tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

from bodega.model.machine import rfc3339
from bodega.model.rows import OverlayAdvert, WorkerRow
from bodega.model.states import MachineState
from bodega.registry import Registry
from bodega.runtime.waits import within
from bodega.worker.api.render import machine_answer, volume_answer
from bodega.worker.core.records import MachineRow, VolumeRow
from bodega.worker.store import queries, volume_queries
from bodega.worker.store.database import Store
from bodega.worker.store.ledger import Ledger

log = logging.getLogger("bodega.worker.publish")

INTERVAL = 0.05  # the coalescing window: one publish per resource per tick
CAPACITY_REFRESH = 1.0  # reservations expire without a log entry
EXPIRY_CHECK = 60.0  # how often destroyed resources past the TTL become tombstones
DESTROYED = str(MachineState.DESTROYED)


class Publisher:
    def __init__(self, node: Registry, *, name: str, region: str, url: str, driver: str,
                 store: Store, ledger: Ledger,
                 service_host: Callable[[MachineRow], str | None],
                 destroyed_ttl: float, interval: float = INTERVAL,
                 images: Callable[[], list[str]] | None = None,
                 subnet: str | None = None,
                 machine_extra: Callable[[MachineRow], Mapping[str, object]] | None = None,
                 overlay: Callable[[], OverlayAdvert | None] | None = None,
                 after_drives: Callable[[float], Awaitable[None]] | None = None,
                 images_off: str | None = None,
                 image_registry: str | None = None,
                 held_back: Callable[[MachineRow], bool] | None = None,
                 jobs_url: str | None = None) -> None:
        self.node = node
        self.jobs_url = jobs_url  # its jobs door, advertised
        self.held_back = held_back  # a machine the view must not see here yet
        self._held: set[str] = set()  # those held back: looked at again every refresh
        self.image_registry = image_registry  # the one its host serves, advertised
        self.images_off = images_off  # why it runs no image machine; None when it does
        self.subnet = subnet  # its machines' /24, when other hosts may route to it
        self.name = name
        self.region = region
        self.url = url
        self.driver = driver
        self.store = store
        self.ledger = ledger
        self.service_host = service_host
        self.destroyed_ttl = destroyed_ttl
        self.interval = interval
        self.images = images  # the images this worker holds, for placement's image bonus
        # What the private network adds: a machine's private address, the host's overlay.
        self.machine_extra = machine_extra
        self.overlay = overlay
        # Waits (at most the given seconds) for the operations under way to end: a tick
        # then publishes a start once, started, not in the middle of it.
        self.after_drives = after_drives
        self._seq = 0
        self._logged = asyncio.Event()  # a commit logged something since the last tick
        store.on_commit(lambda _resource: self._logged.set())
        self._capacity: WorkerRow | None = None  # as last stored, without its time
        self._next_refresh = self._next_expiry = 0.0

    # ── all at once ──────────────────────────────────────────────────────────

    def publish_all(self) -> None:
        """Every row this worker owns, and deletes for rows it no longer has."""
        self._seq = self._last_seq()
        self._capacity = None
        self.publish_capacity()
        horizon = self.store.clock() - self.destroyed_ttl
        keep: dict[str, set[str]] = {"machines": set(), "volumes": set()}
        for row in queries.list_machines(self.store.db, include_destroyed=True):
            if row.state != DESTROYED or row.updated_at >= horizon:
                keep["machines"].add(row.id)
                self._put_machine(row)
        for volume in volume_queries.list_volumes(self.store.db, include_destroyed=True):
            if volume.state != DESTROYED or volume.updated_at >= horizon:
                keep["volumes"].add(volume.id)
                self._put_volume(volume)
        # A machine that moved away is its new worker's to publish or delete: its row
        # here may still say this worker until the new one's arrives.
        away = queries.moved_away_ids(self.store.db)  # machines and their volumes
        keep["machines"] |= away
        keep["volumes"] |= away
        for table, ids in keep.items():
            for doc in self.node.rows(table, worker=self.name):
                if doc["id"] not in ids and not doc.get("generation"):
                    self.node.delete_owned(table, doc["id"])

    def publish_capacity(self, force: bool = False) -> None:
        """The ``workers`` row, written if it changed (or ``force``: the log moved)."""
        snapshot = self.ledger.snapshot()
        (machines,) = self.store.db.execute(
            f"SELECT count(*) FROM machines WHERE {queries.LIVE}").fetchone()
        capacity = WorkerRow(
            name=self.name, region=self.region, url=self.url, jobs_url=self.jobs_url,
            driver=self.driver,
            totals=snapshot.totals, used=snapshot.used, free=snapshot.free,
            cordoned=snapshot.cordoned, cordon_reason=snapshot.cordon_reason,
            reservations=snapshot.reservations,
            machines=int(machines), subnet=self.subnet, images_off=self.images_off,
            images=None if self.images is None else self.images(),
            image_disk_gb=None if self.images is None else self.ledger.image_disk_gb(),
            wireguard=None if self.overlay is None else self.overlay(),
            image_registry=self.image_registry)
        if force or capacity != self._capacity:
            updated_at = rfc3339(self.store.clock())
            self.node.put_owned(WorkerRow.TABLE, self.name,
                                capacity.model_copy(update={"updated_at": updated_at}).doc())
            self._capacity = capacity  # once stored: a failed put is retried next time

    # ── following the log ────────────────────────────────────────────────────

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self._logged.wait(), CAPACITY_REFRESH)
            await asyncio.sleep(self.interval)  # what the burst logs meanwhile goes too
            self._logged.clear()
            if self.after_drives is not None:
                await self.after_drives(self.interval)
            try:
                self.tick(time.monotonic())
            except Exception:  # the next tick retries from the same log position
                log.exception("publishing to the registry failed")

    def tick(self, now: float) -> None:
        last, touched = self._touched()
        # One commit for the tick's rows (a burst of creates touches dozens), kept or
        # refused together: a refused tick is tried again whole from the same place.
        try:
            with self.node.writes_together():
                if touched or now >= self._next_refresh:
                    self.publish_capacity(force=bool(touched))
                    self._next_refresh = now + CAPACITY_REFRESH
                    touched = list(dict.fromkeys([*touched, *self._held]))
                for resource_id in touched:
                    self._publish_resource(resource_id)
        except BaseException:
            self._capacity = None  # refused with the rest: not what the registry holds
            raise
        # Only now: a publish that failed (a full disk under the view) is retried from
        # the same log position next tick, or the resource would stay unpublished.
        self._seq = last
        if now >= self._next_expiry:
            self._next_expiry = now + EXPIRY_CHECK
            self.expire_destroyed()

    def _touched(self) -> tuple[int, list[str]]:
        """The log's last position, and the resources its entries since ours touched."""
        entries = self.store.db.execute(
            "SELECT seq, resource_id FROM ops WHERE seq > ? ORDER BY seq", (self._seq,)
        ).fetchall()
        if not entries:
            return self._seq, []
        return int(entries[-1][0]), list(dict.fromkeys(str(r) for _, r in entries))

    def _publish_resource(self, resource_id: str) -> None:
        machine = queries.get_machine(self.store.db, resource_id)
        if machine is not None:
            self._put_machine(machine)  # which holds it back again, or lets it go
            if machine.volume_id:
                self._publish_resource(machine.volume_id)
            return
        self._held.discard(resource_id)  # a machine held back that is no longer here
        volume = volume_queries.get_volume(self.store.db, resource_id)
        if volume is not None:
            self._put_volume(volume)

    def _put_machine(self, row: MachineRow) -> None:
        if self.held_back is not None and self.held_back(row):
            self._held.add(row.id)
            return
        self._held.discard(row.id)
        machine = machine_answer(row, worker=self.name, service_host=self.service_host(row))
        if self.machine_extra is not None:  # its private address and network
            machine = machine.model_copy(update=dict(self.machine_extra(row)))
        self.node.put_owned("machines", row.id, machine.doc())

    def _put_volume(self, row: VolumeRow) -> None:
        self.node.put_owned("volumes", row.id, volume_answer(row, worker=self.name).doc())

    def expire_destroyed(self) -> None:
        """Machines and volumes destroyed longer than the TTL ago become tombstones."""
        horizon = self.store.clock() - self.destroyed_ttl
        for table in ("machines", "volumes"):
            # A machine that moved keeps its destroyed row: a tombstone (generation 0)
            # would lose to its rows of its own generation (registry rows.py).
            moved = " AND generation = 0"
            for (resource_id,) in self.store.db.execute(
                    f"SELECT id FROM {table} WHERE state = ? AND updated_at < ?{moved}",
                    (DESTROYED, horizon)).fetchall():
                self.node.delete_owned(table, str(resource_id))

    def _last_seq(self) -> int:
        (seq,) = self.store.db.execute("SELECT coalesce(max(seq), 0) FROM ops").fetchone()
        return int(seq)
