"""The registry's subscriptions, both kinds: a result kept current, and its changes.

Two callers, two kinds (their routes: ``routes.py``). A cluster member (the proxy, a
worker's network fence, a tool with a member's certificate) follows the rows of one table
matching indexed columns: ``Subscriptions`` below, fed in the very call that applied each
change, in memory, cut when it falls behind. A user follows any SELECT:
``LiveSubscriptions``, re-run on one thread, diffed, logged on disk, resumable. This module
is long because it is both, and they are one idea: a result, then every change to it.

Live subscriptions: a query's result kept current, its changes logged and followed.

    POST ──▶ run the query ──▶ a new subscription (rows numbered 1..n), or the
             same statement's (its result refreshed: the differences logged)
    changed(tables) ──▶ the subscriptions reading them (interest.py) are pending
    worker: a short settle, then each pending one once ──▶ run ──▶ diff (changes.py)
             ──▶ store (one transaction) ──▶ wake its followers
    follower: the changes after the one it saw, read from the store, then waits

Every query run and every store write happens on one thread, in order, so a
subscription's result is never refreshed by an older run after a newer one, and
a burst of ``changed`` calls costs each subscription one re-run. Followers read
the log (on a connection of their own), so a slow one never holds anyone up: it
falls behind only as far as the log is kept, and is then told its changes are
gone. On start every kept subscription is pending: what changed while the
agent was down is found and logged like any change.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from bodega.model.errors import (
    BadRequest,
    BodegaError,
    Gone,
    NotFound,
    TooManyRequests,
    Unavailable,
)
from bodega.model.json import JsonObject
from bodega.registry.api.core.changes import ResultRow, diff, numbered
from bodega.registry.api.core.interest import Stamps, touched
from bodega.registry.api.core.limits import QueryLimits
from bodega.registry.api.core.window import Resume, refusal, resume
from bodega.registry.api.reader import Reader, Result
from bodega.registry.api.store import LoggedChange, StoreClosed, SubscriptionStore
from bodega.registry.membership.feed import Feed
from bodega.registry.replication.core.rows import Change, Document, Row
from bodega.registry.replication.core.schema import TABLES, Filters
from bodega.runtime.waits import within
from bodega.wire.public.queries import Statement

log = logging.getLogger("bodega.registry.queries")

T = TypeVar("T")
FEED_BATCH = 500  # changes a follower reads at a time
SWEEP_SECONDS = 60.0  # how often idle subscriptions are looked for


@dataclass(frozen=True)
class Opened:
    """A subscription's result, and the change it is current as of."""
    id: str
    columns: tuple[str, ...]
    rows: tuple[ResultRow, ...]
    change_id: int
    seconds: float  # the query's time (0 for a result read from the store)


@dataclass(frozen=True)
class Ended:
    """Why a follower's stream ends: its changes are gone, or its query fails now."""
    message: str


@dataclass(frozen=True)
class Refreshed:
    changed: bool = False
    failure: str | None = None


class LiveSubscriptions:
    def __init__(self, reader: Reader, state_dir: Path, limits: QueryLimits, *,
                 wall: Callable[[], float] = time.time) -> None:
        self._reader = reader
        self._dir = state_dir
        self._limits = limits
        self._wall = wall
        self._store: SubscriptionStore | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._worker: asyncio.Task[None] | None = None
        self._interests: dict[str, frozenset[str]] = {}
        self._pending: set[str] = set()
        self._stamps = Stamps()
        self._wake = asyncio.Event()
        self._notices: dict[str, asyncio.Event] = {}
        self._failures: dict[str, str] = {}
        self._followers: Counter[str] = Counter()
        self._stopping = False
        self.reruns = 0  # subscription queries run again (a burst of changes counts once)

    # ── lifecycle ────────────────────────────────────────────────────────────

    async def start(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="bodega-subscriptions")
        self._store = await self._call(lambda: SubscriptionStore(self._dir, wall=self._wall))
        store = self._store
        await self._call(lambda: store.expire(self._limits.idle, ()))
        for stored in await self._call(store.all):
            self._interests[stored.id] = stored.tables
            self._pending.add(stored.id)
        self._worker = asyncio.create_task(self._work(), name="subscriptions")
        self._wake.set()

    async def stop(self) -> None:
        self._stopping = True
        for notice in self._notices.values():
            notice.set()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        if self._executor is not None:
            if self._store is not None:
                await self._call(self._store.close)
            self._executor.shutdown(wait=False)
        self._store = self._executor = self._worker = None

    @property
    def pending(self) -> frozenset[str]:
        """The subscriptions waiting to re-run."""
        return frozenset(self._pending)

    # ── the agent's side ─────────────────────────────────────────────────────

    def changed(self, tables: Iterable[str]) -> None:
        """These replicated tables changed: re-run the subscriptions that read them."""
        names = set(tables)
        self._stamps.bump(names)
        hit = touched(self._interests, names)
        if hit:
            self._pending |= hit
            self._wake.set()

    # ── a client's side ──────────────────────────────────────────────────────

    async def subscribe(self, statement: Statement) -> Opened:
        store = self._running()
        since = self._stamps.snapshot()
        opened, tables, changed = await self._call(lambda: self._open(store, statement))
        self._interests[opened.id] = tables
        if changed:
            self._notify(opened.id)
        if self._stamps.moved(since, tables):  # a change may have come just before its run
            self._pending.add(opened.id)
            self._wake.set()
        return opened

    async def current(self, sub: str) -> Opened:
        """A subscription's result as last refreshed; ``NotFound`` for an unknown id."""
        store = self._running()
        stored, rows = await self._call(lambda: (store.get(sub), store.rows(sub)))
        if stored is None:
            raise NotFound(f"no subscription {sub} (expired, or never made here)")
        return Opened(sub, stored.columns, tuple(rows), stored.kept.last, 0.0)

    async def check_resume(self, sub: str, seen: int) -> None:
        """Refuse, before any line is sent, a resume that cannot be served."""
        store = self._running()
        stored = await self._call(lambda: store.get(sub))
        if stored is None:
            raise NotFound(f"no subscription {sub} (expired, or never made here)")
        verdict = resume(seen, stored.kept)
        if verdict is Resume.AHEAD:
            raise BadRequest(refusal(seen, stored.kept))
        if verdict is Resume.GONE:
            raise Gone(refusal(seen, stored.kept))

    async def follow(self, sub: str, seen: int) -> AsyncIterator[LoggedChange | Ended]:
        """Every change after ``seen``, then each as it is made, until the agent stops."""
        store = self._store
        if store is None or self._stopping:
            return  # stopped between the answer's head and its body
        self._followers[sub] += 1
        try:
            while not self._stopping:
                notice = self._notices.setdefault(sub, asyncio.Event())
                try:
                    kept, batch = await asyncio.to_thread(store.changes_after, sub, seen,
                                                          FEED_BATCH)
                except KeyError:
                    yield Ended(f"subscription {sub} is gone")
                    return
                except StoreClosed:
                    return  # the agent stops: the client resumes against the next one
                if resume(seen, kept) is Resume.GONE:
                    yield Ended(f"this client fell behind: {refusal(seen, kept)}")
                    return
                for change in batch:
                    yield change
                    seen = change.id
                if batch:
                    continue
                if (failure := self._failures.get(sub)) is not None:
                    yield Ended(failure)
                    return
                await notice.wait()
        finally:
            self._followers[sub] -= 1
            if self._followers[sub] <= 0:
                del self._followers[sub]
            if self._executor is not None and not self._stopping:
                self._executor.submit(store.touch, sub)

    # ── inside: on the subscriptions' thread ─────────────────────────────────

    def _open(self, store: SubscriptionStore,
              statement: Statement) -> tuple[Opened, frozenset[str], bool]:
        result = self._whole(self._reader.run(statement))
        stored = store.find(statement)
        if stored is None:
            if store.count() >= self._limits.subscriptions:
                raise TooManyRequests(
                    f"this agent keeps {self._limits.subscriptions} subscriptions, all in "
                    "use; one nobody follows expires after "
                    f"{self._limits.idle:g} s", status="resource_exhausted",
                    retry_after=min(self._limits.idle, SWEEP_SECONDS))
            rows = numbered(result.rows)
            stored = store.create(str(uuid.uuid4()), statement, result.tables, result.columns,
                                  rows)
            return Opened(stored.id, result.columns, rows, 0, result.seconds), result.tables, False
        if result.columns != stored.columns:
            raise BadRequest(f"invalid_argument: the columns of subscription {stored.id} "
                             "changed; subscribe with another statement")
        found = diff(store.rows(stored.id), result.rows, stored.next_number)
        kept = store.apply(stored, found, self._limits.kept_changes)
        store.touch(stored.id)
        return (Opened(stored.id, result.columns, found.rows, kept.last, result.seconds),
                stored.tables, bool(found.changes))

    def _refresh(self, sub: str) -> Refreshed:
        store = self._running()
        stored = store.get(sub)
        if stored is None:
            return Refreshed()
        try:
            result = self._whole(self._reader.run(stored.statement))
        except BodegaError as exc:
            return Refreshed(failure=f"subscription {sub}'s query fails now: {exc.message}")
        if result.columns != stored.columns:
            return Refreshed(failure=f"subscription {sub}'s columns changed: subscribe again")
        found = diff(store.rows(sub), result.rows, stored.next_number)
        store.apply(stored, found, self._limits.kept_changes)
        return Refreshed(changed=bool(found.changes))

    def _whole(self, result: Result) -> Result:
        if result.stopped is not None:
            raise BadRequest(f"invalid_argument: a subscription's result must be whole: "
                             f"{result.stopped}")
        return result

    # ── inside: on the event loop ────────────────────────────────────────────

    async def _work(self) -> None:
        swept = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self._wake.wait(), SWEEP_SECONDS)
            self._wake.clear()
            if self._pending and self._limits.settle:
                await asyncio.sleep(self._limits.settle)  # a burst of changes: one re-run
            batch, self._pending = self._pending, set()
            for sub in sorted(batch):
                try:
                    outcome = await self._call(functools.partial(self._refresh, sub))
                except Exception:
                    log.exception("refreshing subscription %s failed", sub)
                    continue
                self.reruns += 1
                if outcome.failure is not None:
                    self._failures[sub] = outcome.failure
                else:
                    self._failures.pop(sub, None)
                if outcome.changed or outcome.failure is not None:
                    self._notify(sub)
            if time.monotonic() - swept >= SWEEP_SECONDS:
                swept = time.monotonic()
                await self._sweep()

    async def _sweep(self) -> None:
        store = self._running()
        followed = list(self._followers)
        for sub in await self._call(lambda: store.expire(self._limits.idle, followed)):
            self._interests.pop(sub, None)
            self._failures.pop(sub, None)
            self._notices.pop(sub, None)

    def _notify(self, sub: str) -> None:
        notice = self._notices.pop(sub, None)
        if notice is not None:
            notice.set()

    def _running(self) -> SubscriptionStore:
        if self._store is None or self._stopping:
            raise Unavailable("the registry's subscriptions are not running")
        return self._store

    async def _call(self, work: Callable[[], T]) -> T:
        assert self._executor is not None
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)


# -- members' row subscriptions -------------------------------------------------------------
# Subscriptions: a query's current rows, then every change to its result, as applied here.
#
# ``subscribe("machines", app="web")`` yields the matching rows (kind
# ``initial``), then, as the replica applies changes, ``insert`` when a row
# enters the result, ``update`` when a row in it changes, ``delete`` when it
# leaves (deleted, or no longer matching the filters). Changes are fed in
# the same call that applied them, so nothing can fall between the initial
# rows and the first change.
#
# A consumer that falls ``capacity`` changes behind is cut off with
# ``FeedLagged`` instead of silently missing changes (a proxy that lost a
# "machine stopped" would route to it forever); it subscribes again and gets
# a fresh snapshot. Corrosion disconnects lagging subscribers the same way.

ChangeKind = Literal["initial", "insert", "update", "delete"]
DEFAULT_CAPACITY = 10_000


@dataclass(frozen=True)
class RowChange:
    kind: ChangeKind
    table: str
    key: str
    doc: Document | None  # None for a delete

    def to_json(self) -> JsonObject:
        return {"kind": self.kind, "table": self.table, "key": self.key, "doc": self.doc}


def normalize_filters(table: str, filters: Mapping[str, object]) -> Filters:
    """Check filters (as a client sent them: any JSON object) name indexed columns of
    ``table`` and hold strings or integers; booleans compare as 0/1."""
    spec = TABLES.get(table)
    if spec is None:
        raise ValueError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
    allowed = {spec.key, *spec.column_names}
    out: Filters = {}
    for name, value in filters.items():
        if name not in allowed:
            raise ValueError(f"{table} can be filtered on {', '.join(sorted(allowed))}, "
                             f"not {name!r}")
        if not isinstance(value, str | int):
            raise ValueError(f"filter {name} must be a string or an integer")
        out[name] = int(value) if isinstance(value, bool) else value
    return out


class Subscription(Feed[RowChange]):
    def __init__(self, table: str, filters: Filters, initial: list[Row], capacity: int,
                 on_close: Callable[[Feed[RowChange]], None]) -> None:
        super().__init__(len(initial) + capacity, on_close)
        self.table = table
        self.filters = filters
        self.initial_count = len(initial)
        for row in initial:
            self.put(RowChange("initial", table, row.key, row.doc))

    def matches(self, row: Row | None) -> bool:
        if row is None or row.doc is None or row.table != self.table:
            return False
        if not self.filters:
            return True
        values = TABLES[self.table].indexed(row.key, row.doc)
        return all(values.get(name) == value for name, value in self.filters.items())

    def offer(self, change: Change) -> None:
        was, now = self.matches(change.old), self.matches(change.new)
        if now:
            assert change.new is not None
            self.put(RowChange("update" if was else "insert", self.table, change.new.key,
                               change.new.doc))
        elif was:
            assert change.old is not None
            self.put(RowChange("delete", self.table, change.old.key, None))


class Subscriptions:
    def __init__(self, capacity: int = DEFAULT_CAPACITY,
                 on_lagged: Callable[[], None] = lambda: None) -> None:
        self.capacity = capacity
        self._on_lagged = on_lagged
        self._open: list[Subscription] = []

    def __len__(self) -> int:
        return len(self._open)

    def open(self, table: str, filters: Filters, initial: list[Row]) -> Subscription:
        sub = Subscription(table, filters, initial, self.capacity, self._closed)
        self._open.append(sub)
        return sub

    def publish(self, changes: list[Change]) -> None:
        for sub in list(self._open):
            for change in changes:
                sub.offer(change)
                if sub.closed:
                    if sub.lagged:
                        self._on_lagged()
                    break

    def close_all(self) -> None:
        for sub in list(self._open):
            sub.close()

    def _closed(self, feed: Feed[RowChange]) -> None:
        self._open = [sub for sub in self._open if sub is not feed]
