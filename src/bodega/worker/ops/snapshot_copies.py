"""Snapshots off their host: each one a worker takes is sent whole to another worker,
and a worker asked to restore one it lacks fetches it from a holder first.

The shell of ``core/snapshot_places.py``. Sending is a tar stream of the snapshot's
tree (``host/snapshot_tar.py``) with a ``SnapshotCopy`` header saying what it is;
the receiver extracts it beside its own snapshots, checks the digest against the
header's and only then records it (a row with ``origin`` set), so a copy either is
whole or is not there. The origin records who holds one (``copies``); until one
does, the snapshot is local-only, and the upkeep (``run``) tries again, takes the
scheduled snapshots that are due and removes expired ones, on every holder alike.

Who the other workers are, where they answer and whether they are alive, comes from
a ``Directory``: the worker's registry view in a cluster (``ViewDirectory``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import ssl
import tarfile
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from bodega.model.errors import BadRequest, NotFound, Unavailable
from bodega.model.rows import WorkerRow
from bodega.registry import Registry
from bodega.runtime.waits import within
from bodega.wire.internal.worker_calls import SnapshotCopy
from bodega.wire.transport.aiohttp_transport import session
from bodega.worker.core.records import SnapshotRow
from bodega.worker.core.snapshot_places import Place, Scheduled, copy_targets, due, fetch_order
from bodega.worker.host.snapshot_tar import DigestMismatch, pack, unpack
from bodega.worker.ops.snapshots import VolumeSnapshots
from bodega.worker.store import snapshot_queries as q
from bodega.worker.store import volume_queries

log = logging.getLogger("bodega.worker.snapshots")
HEADER = "x-bodega-snapshot"
SEND_TIMEOUT = 3600.0  # a whole snapshot's bytes, worker to worker
ANSWER_WITHIN = 5.0  # under the broker's 10 s wait for a worker (broker/view/workers.py)
CHUNK = 1 << 20


class Directory(Protocol):
    """The other workers, as this one can reach them."""

    def places(self) -> list[Place]: ...


class ViewDirectory:
    """The workers of the registry view: their URLs and regions, alive as gossip says."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def places(self) -> list[Place]:
        live = {m.name: m.status.live for m in self.registry.members()}
        return [Place(name=row.name, url=row.url, region=row.region,
                      alive=live.get(row.name, False), cordoned=row.cordoned)
                for row in self.registry.rows(WorkerRow) if row.url]


def _seen(task: asyncio.Future[SnapshotRow]) -> None:
    """A transfer's error, logged where nobody waits for it any more."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("a snapshot transfer failed: %s", exc)


def copy_of(row: SnapshotRow, origin: str) -> SnapshotCopy:
    return SnapshotCopy(id=row.id, volume_id=row.volume_id, app=row.app, digest=row.digest,
                        size=row.size, volume_size_gb=row.volume_size_gb,
                        retention_days=row.retention_days, created_at=row.created_at,
                        expires_at=row.expires_at, origin=row.origin or origin)


class SnapshotCopies:
    def __init__(self, snapshots: VolumeSnapshots, own: Callable[[], Place],
                 tls: ssl.SSLContext | None, work_dir: Path, *, copies: int = 1,
                 schedule_every: float = 86400.0, upkeep_every: float = 30.0,
                 answer_within: float = ANSWER_WITHIN) -> None:
        """``copies``: how many other workers hold each snapshot; ``schedule_every``:
        seconds between a volume's scheduled snapshots; ``upkeep_every``: between passes;
        ``answer_within``: how long a take or a restore waits for a transfer before it
        answers (under the broker's patience with a worker) and lets it go on."""
        self.snapshots = snapshots
        self.store = snapshots.store
        self.own = own
        self.tls = tls
        self.work_dir = work_dir
        self.copies = copies
        self.schedule_every = schedule_every
        self.upkeep_every = upkeep_every
        self.directory: Directory | None = None
        self._session: aiohttp.ClientSession | None = None
        self.answer_within = answer_within
        self._background: set[asyncio.Future[SnapshotRow]] = set()
        self._fetching: dict[str, asyncio.Future[SnapshotRow]] = {}  # snapshot id -> its fetch
        self._send = asyncio.Lock()  # one snapshot sent at a time: it has the link to itself
        self._upkeep = asyncio.Lock()  # one pass at a time: a due volume gets one snapshot

    # -- taking and sending -----------------------------------------------------------------
    async def take(self, volume_id: str, app: str) -> SnapshotRow:
        """Snapshot the volume and send it off this host. The answer waits for the copy
        up to ``answer_within`` seconds; a longer one goes on in the background, and one
        that fails is retried by the upkeep: the answer says the snapshot is local-only
        meanwhile."""
        row = await self.snapshots.take(volume_id, app)
        return await self._outlasting(self.send_off(row), row)

    async def _outlasting(self, work: Coroutine[Any, Any, SnapshotRow],
                          meanwhile: SnapshotRow) -> SnapshotRow:
        """``work``'s answer if it ends within ``answer_within``, else ``meanwhile`` (it goes
        on: neither a caller that gives up nor the wait cancels it)."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_seen)
        try:
            return await within(asyncio.shield(task), self.answer_within)
        except TimeoutError:
            log.info("%s: snapshot %s still being sent; answered as local-only for now",
                     meanwhile.volume_id, meanwhile.id)
            return meanwhile

    async def send_off(self, row: SnapshotRow) -> SnapshotRow:
        async with self._send:
            row = q.get_snapshot(self.store.db, row.id) or row
            targets = copy_targets(self.own(), self._places(), row.holders, self.copies)
            if not targets:
                return row
            held, tries = row.holders, row.copy_tries
            with self._scratch() as scratch:
                archive = scratch / "snapshot.tar"
                started = time.monotonic()
                sent = await asyncio.to_thread(pack, self.snapshots.snapshot_dir(row.id),
                                               archive)
                for target in targets:
                    try:
                        await self._put(target.name, copy_of(row, self.own().name), archive)
                        held.append(target.name)
                        log.info("%s: snapshot %s copied to %s (%s; %d bytes in %.2fs)",
                                 row.volume_id, row.id, target.name, target.why, sent,
                                 time.monotonic() - started)
                    except (Unavailable, OSError, aiohttp.ClientError) as exc:
                        tries += 1
                        log.warning("%s: snapshot %s not copied to %s: %s", row.volume_id,
                                    row.id, target.name, exc)
            with self.store.tx() as conn:
                q.set_copies(conn, row.id, held, tries)
            return q.get_snapshot(self.store.db, row.id) or row

    async def _put(self, worker: str, meta: SnapshotCopy, archive: Path) -> None:
        url = self._url(worker)

        async def chunks() -> AsyncIterator[bytes]:
            with archive.open("rb") as f:
                while chunk := await asyncio.to_thread(f.read, CHUNK):
                    yield chunk

        async with self._client().put(
                f"{url}/v1/snapshots/{meta.id}/data", data=chunks(),
                headers={HEADER: meta.model_dump_json()},
                timeout=aiohttp.ClientTimeout(total=SEND_TIMEOUT)) as answer:
            if answer.status != 200:
                raise Unavailable(f"worker {worker} answered {answer.status}: "
                                  f"{(await answer.text())[:300]}")

    # -- receiving and fetching ---------------------------------------------------------------
    async def receive(self, meta: SnapshotCopy, body: AsyncIterator[bytes]) -> SnapshotRow:
        """Keep a copy sent by another worker, once its digest is checked."""
        found = q.get_snapshot(self.store.db, meta.id)
        if found is not None and found.status == "created":
            async for _ in body:  # the sender's stream is read whole either way
                pass
            return found
        with self._scratch() as scratch:
            archive = scratch / "snapshot.tar"
            with archive.open("wb") as f:
                async for chunk in body:
                    await asyncio.to_thread(f.write, chunk)
            try:
                return await self._keep(meta, archive)
            except (DigestMismatch, tarfile.TarError) as exc:
                raise BadRequest(f"invalid_argument: snapshot {meta.id} not kept: {exc}"
                                 ) from None

    async def _keep(self, meta: SnapshotCopy, archive: Path) -> SnapshotRow:
        target = self.snapshots.snapshot_dir(meta.id)
        partial = target.with_suffix(".partial")
        size, digest = await asyncio.to_thread(unpack, archive, partial, meta.digest)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        row = SnapshotRow(id=meta.id, volume_id=meta.volume_id, app=meta.app,
                          status="created", size=size, digest=digest,
                          volume_size_gb=meta.volume_size_gb,
                          retention_days=meta.retention_days, created_at=meta.created_at,
                          expires_at=meta.expires_at, origin=meta.origin)
        with self.store.tx() as conn:
            q.delete_snapshot(conn, meta.id)
            q.insert_snapshot(conn, row)
        log.info("%s: keeping a copy of snapshot %s from %s (%d bytes)", meta.volume_id,
                 meta.id, meta.origin, size)
        return row

    async def fetch(self, snapshot_id: str, app: str, holders: list[str]) -> SnapshotRow:
        """The snapshot, from this worker's store or else fetched from a holder. A fetch
        goes on when its caller gives up (a broker's wait is shorter than a big
        snapshot's transfer): asked again, the worker has it."""
        found = q.get_snapshot(self.store.db, snapshot_id)
        if found is not None and found.status == "created" and found.app == app:
            return found
        fetching = self._fetching.get(snapshot_id)
        if fetching is None:
            fetching = self._fetching[snapshot_id] = asyncio.ensure_future(
                self._fetch(snapshot_id, app, holders))
            fetching.add_done_callback(lambda _: self._fetching.pop(snapshot_id, None))
            fetching.add_done_callback(_seen)
        return await asyncio.shield(fetching)

    async def _fetch(self, snapshot_id: str, app: str, holders: list[str]) -> SnapshotRow:
        failures: list[str] = []
        for holder in fetch_order(holders, self._places(), self.own()):
            try:
                return await self._get(holder, snapshot_id, app)
            except NotFound:
                failures.append(f"{holder} (does not hold it)")
            except (Unavailable, OSError, aiohttp.ClientError, ValueError,
                    tarfile.TarError) as exc:
                failures.append(f"{holder} ({exc})")
        if not failures:
            raise NotFound(f"snapshot not found: {snapshot_id}")
        raise Unavailable(f"snapshot {snapshot_id} could not be fetched from any holder: "
                          f"{'; '.join(failures)}")

    async def _get(self, holder: str, snapshot_id: str, app: str) -> SnapshotRow:
        started = time.monotonic()
        async with self._client().get(
                f"{self._url(holder)}/v1/snapshots/{snapshot_id}/data", params={"app": app},
                timeout=aiohttp.ClientTimeout(total=SEND_TIMEOUT)) as answer:
            if answer.status == 404:
                raise NotFound(f"snapshot not found: {snapshot_id}")
            if answer.status != 200:
                raise Unavailable(f"answered {answer.status}: {(await answer.text())[:300]}")
            meta = SnapshotCopy.model_validate_json(answer.headers[HEADER])
            if meta.id != snapshot_id or meta.app != app:
                raise Unavailable(f"{holder} sent snapshot {meta.id} of {meta.app}")
            with self._scratch() as scratch:
                archive = scratch / "snapshot.tar"
                with archive.open("wb") as f:
                    async for chunk in answer.content.iter_chunked(CHUNK):
                        await asyncio.to_thread(f.write, chunk)
                row = await self._keep(meta, archive)
        log.info("%s: snapshot %s fetched from %s in %.2fs", row.volume_id, snapshot_id,
                 holder, time.monotonic() - started)
        return row

    async def archive(self, snapshot_id: str, app: str) -> tuple[SnapshotCopy, Path]:
        """The snapshot packed for a worker fetching it, and what it is; the caller
        removes the archive's directory once sent."""
        row = self.snapshots.get(snapshot_id, app)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        archive = Path(tempfile.mkdtemp(dir=self.work_dir)) / "snapshot.tar"
        try:
            await asyncio.to_thread(pack, self.snapshots.snapshot_dir(row.id), archive)
        except BaseException:
            shutil.rmtree(archive.parent, ignore_errors=True)
            raise
        return copy_of(row, self.own().name), archive

    # -- upkeep -----------------------------------------------------------------------------
    async def run(self) -> None:
        """Remove expired snapshots, take scheduled ones, retry copies: forever."""
        while True:
            try:
                await self.upkeep()
            except Exception:
                log.exception("snapshot upkeep failed; trying again next pass")
            await asyncio.sleep(self.upkeep_every)

    async def upkeep(self) -> None:
        async with self._upkeep:
            await self._pass()

    async def _pass(self) -> None:
        self.snapshots.prune()
        newest = q.newest_taken(self.store.db)
        volumes = [v for v in volume_queries.list_volumes(self.store.db)
                   if v.state == "created"]
        scheduled = [Scheduled(volume_id=v.id, enabled=v.auto_backup_enabled,
                               since=newest.get(v.id, v.created_at)) for v in volumes]
        apps = {v.id: v.app for v in volumes}
        for volume_id in due(scheduled, self.schedule_every, self.store.clock()):
            try:
                row = await self.snapshots.take(volume_id, apps[volume_id])
            except Exception as exc:  # the next pass tries again
                log.warning("%s: scheduled snapshot failed: %s", volume_id, exc)
                continue
            log.info("%s: scheduled snapshot %s taken", volume_id, row.id)
        for row in q.uncopied(self.store.db):
            await self.send_off(row)

    # -- plumbing ---------------------------------------------------------------------------
    def _places(self) -> list[Place]:
        return self.directory.places() if self.directory is not None else []

    def _url(self, worker: str) -> str:
        for place in self._places():
            if place.name == worker:
                return place.url
        raise Unavailable(f"worker {worker} is not in this worker's view", status="unreachable")

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = session(4, ssl=self.tls)
        return self._session

    @contextlib.contextmanager
    def _scratch(self) -> Iterator[Path]:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(dir=self.work_dir))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def recover(self) -> None:
        """Drop what transfers cut short by a stop left: their tar files, and trees
        extracted but never kept (a snapshot being taken has its own ``recover``)."""
        shutil.rmtree(self.work_dir, ignore_errors=True)
        for partial in self.work_dir.parent.glob("*.partial"):
            shutil.rmtree(partial, ignore_errors=True)

    async def aclose(self) -> None:
        for task in [*self._background, *self._fetching.values()]:
            task.cancel()
        if self._session is not None:
            await self._session.close()
