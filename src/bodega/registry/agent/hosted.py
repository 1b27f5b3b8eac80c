"""``HostedNode``: a daemon's registry when its host runs a registry agent.

The host's agent (``bodega agent``, ``agent.py``) holds the host's one replica
and does the replicating: gossip of rows, anti-entropy, applying every row of
the cluster, once per host. A worker, broker or proxy on that host uses this
node instead of a ``RegistryNode`` of its own, with the same calls:

- **reads** (``get``, ``rows``, ``subscribe``) go to the agent's view, its
  SQLite file, on a connection that cannot write: microseconds, no call;
- **writes** go first to a store of this process's own (``own.db``, a replica
  that holds only its rows, numbered by its own counter and committed before
  the write returns), then are handed to the agent at once. The rows keep this
  process as their owner and origin: the agent applies them as a peer's and
  gossips them on; it relays, never rewrites (a worker stays the only writer
  of its machines' rows);
- **until the agent has them** (it is down, or restarting), reads see this
  process's rows over the agent's view, and a catch-up hands the agent what it
  lacks once it answers again (its answer is what it has seen of us, so a
  catch-up is a sync reply served from our store). A kill -9 of the agent
  loses nothing: what it had not committed, we hold and hand again;
- **subscriptions** follow the agent's view in the order it applied rows (its
  ``_seq`` column), looked at when the agent says it applied some (a long poll
  on its socket: nothing runs while nothing changes; under load, one look per
  ``FOLLOW_GAP``) and SQLite says the file changed; this process's own writes
  are published at once;
- **membership**: the process speaks no SWIM; it is a tenant of the agent
  (``tenant.py``): it checks in about once a second, the agent gossips its
  record and judges it by its silence, and the members it reads are the ones
  the agent answers with.

The module is long because it is one idea with two directions that share its
state (the rows this process wrote and the agent has not seen yet are both what
its reads overlay and what it hands): changes in (following the view) and out
(handing and catching up).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path

from prometheus_client import CollectorRegistry
from starlette.routing import BaseRoute

from bodega.model.rows import TypedReads
from bodega.registry.agent.link import AgentLink, AgentUnavailable, ChangeMark
from bodega.registry.agent.tenant import TenantMembership
from bodega.registry.api.subscriptions import Subscription, Subscriptions, normalize_filters
from bodega.registry.gossipkeys import KEY, TABLE, GossipKeys
from bodega.registry.member_surface import MemberSurface
from bodega.registry.membership.core.config import MembershipConfig
from bodega.registry.node import RegistryConfig, RegistryNode
from bodega.registry.replication.core.exchange import SyncReply, SyncRequest
from bodega.registry.replication.core.known import Known
from bodega.registry.replication.core.rows import Change, Document, Row, newer
from bodega.registry.replication.core.schema import TABLES, Filters
from bodega.registry.replication.replica import Replica
from bodega.registry.replication.view import View
from bodega.runtime.lifecycle import private_dir
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.waits import within

log = logging.getLogger("bodega.registry")

VIEW_NAME = "registry.db"  # the agent's view, in its data dir
OWN_NAME = "own.db"
RETRY = 0.5  # after the agent did not answer (subscriptions look at its view that often)
# After a look at the view, the next waits this long: a burst of applies (hundreds a second
# under load) becomes one look per gap in each of the host's processes, not one per apply.
FOLLOW_GAP = 0.02
AUDIT_INTERVAL = 10.0  # a catch-up now and then, even when every hand was answered
HAND_ROWS = 2000  # rows per hand during a catch-up
AGENT = "agent"  # the name our sync requests give the agent: it serves nothing to us


class AgentMissing(RuntimeError):
    """No registry agent has made its view in the directory given."""


class HostedNode(MemberSurface, TypedReads):
    membership: TenantMembership

    def __init__(self, config: RegistryConfig, agent_dir: Path) -> None:
        view_path = agent_dir / VIEW_NAME
        if not view_path.exists():
            raise AgentMissing(f"no registry agent runs for {agent_dir} (it has no view yet):"
                               f" start `bodega agent --data-dir {agent_dir}` first")
        self.config = config
        self.agent_dir = agent_dir
        self._meta = dict(config.meta)
        private_dir(config.data_dir)
        self.own = Replica(config.name, View(config.data_dir / OWN_NAME),
                           tombstone_ttl=config.tombstone_ttl)
        self.view = View(view_path, reader=True)
        self._link = AgentLink(agent_dir, timeout=config.sync_timeout)
        self.membership = TenantMembership(MembershipConfig(
            name=config.name, role=config.role, region=config.region, data_dir=config.data_dir,
            keyring=config.keyring, bind_host=config.bind_host, bind_port=config.bind_port,
            advertise_host=config.advertise_host, meta=dict(self._meta), swim=config.swim,
        ), AgentLink(agent_dir, timeout=config.sync_timeout))
        self._pending: dict[tuple[str, str], Row] = {}  # ours, not yet seen by the agent
        self._unsent: list[Row] = []
        self._wake = asyncio.Event()
        self._behind = True  # a catch-up first: the agent may lack what we wrote while away
        self._followed: dict[str, dict[str, Row]] = {}
        self._interest_grew = asyncio.Event()  # a table was followed while a poll was held
        self._seq: dict[str, int] = {}
        self._data_version = -1
        self._tops = self.view.tops()  # each table's last _seq, for ``table_listeners``
        self.subscriptions = Subscriptions(config.subscription_capacity)
        self.keys = GossipKeys(self.membership, view_row=lambda: self._current(TABLE, KEY),
                               write_row=self.put_shared, file=config.keyring_file,
                               grace=config.swim.probe_interval)
        self._follow_table(TABLE)
        self._tasks: list[asyncio.Task[None]] = []
        self._started = self._stopped = False
        self.table_listeners: list[Callable[[set[str]], None]] = []

    # ── lifecycle ────────────────────────────────────────────────────────────

    async def start(self) -> None:
        if self._started:
            raise RuntimeError("registry node is already started")
        self._started = True
        await self.membership.start()
        self._tasks = [asyncio.create_task(self._handing(), name="registry-hand"),
                       asyncio.create_task(self._following(), name="registry-follow"),
                       asyncio.create_task(self._housekeeping(), name="registry-housekeeping")]

    async def stop(self, *, leave: bool = True) -> None:
        if self._stopped:
            return
        self._stopped = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._unsent:  # a last hand; what misses it is in our store for next time
            with contextlib.suppress(AgentUnavailable):
                await self._hand(SyncReply(rows=self._unsent))
        if self._started:
            alone = not any(m.status.live for m in self.membership.members()
                            if m.name != self.config.name)
            await self.membership.stop(leave=leave and not alone)
        await self._link.aclose()
        self.subscriptions.close_all()
        self.view.close()
        self.own.view.close()

    def routes(self) -> list[BaseRoute]:
        return []  # peers pull from the host's agent

    async def sync_round(self, *, count: int | None = None) -> int:
        """Have the agent pull from its peers now; how many views were brought up to date:
        the agent's pulls, and the host's own (the agent answered: every writer on this host
        hands it rows directly, so its view is current for them)."""
        try:
            return 1 + await self._link.sync_round()
        except AgentUnavailable:
            return 0

    # ── writes ───────────────────────────────────────────────────────────────

    def _write(self, table: str, key: str, doc: Document | None, *, shared: bool) -> None:
        before = self._current(table, key)
        if shared and before is not None:
            self.own.clock.observe(before.stamp)  # a write made after reading a row wins
        change = self.own.write(table, key, doc, shared=shared)
        if change is None or change.new is None:
            return
        batched = self._batched(table).get(key)  # written earlier in this batch: replaced
        old = batched if batched is not None else self._followed.get(table, {}).get(key, before)
        self._wrote(Change(old, change.new))

    def _batched(self, table: str) -> dict[str, Row]:
        """Our newest row of each key of ``table`` in the batch being written
        (``writes_together``), which only its commit hands on: the batch's own reads see
        them meanwhile."""
        return {change.new.key: change.new for change in self._held or ()
                if change.new is not None and change.new.table == table}

    def _store_together(self) -> AbstractContextManager[None]:
        return self.own.together()

    def _written(self, changes: list[Change]) -> None:
        for change in changes:
            if change.new is not None:
                self._pending[(change.new.table, change.new.key)] = change.new
                self._unsent.append(change.new)
        self._wake.set()
        self._publish(changes)

    # ── reads ────────────────────────────────────────────────────────────────

    def _current(self, table: str, key: str) -> Row | None:
        row = self.view.get(table, key)
        mine = self._batched(table).get(key) or self._pending.get((table, key))
        return mine if mine is not None and (row is None or newer(mine, row)) else row

    def _doc(self, table: str, key: str) -> Document | None:
        row = self._current(table, key)
        return None if row is None else row.doc

    def _docs(self, table: str, without: Mapping[str, str | int] | None,
              filters: Mapping[str, str | int]) -> list[Document]:
        wanted = normalize_filters(table, filters)
        unless = normalize_filters(table, without or {})
        found = self.view.select(table, wanted, unless=unless)
        mine = {key: row for (t, key), row in self._pending.items() if t == table}
        mine.update(self._batched(table))
        if not mine:
            return [row.doc for row in found if row.doc is not None]
        rows: dict[str, Row] = {}
        for row in found:
            held = mine.pop(row.key, None)
            rows[row.key] = held if held is not None and newer(held, row) else row
        for key, held in mine.items():
            if not matches(held, wanted, unless):
                continue  # nor is the view's copy (not found above): no lookup
            theirs = self.view.get(table, key)
            if theirs is None or newer(held, theirs):
                rows[key] = held
        return [doc for key in sorted(rows)
                if (doc := rows[key].doc) is not None and matches(rows[key], wanted, unless)]

    def subscribe(self, table: str, **filters: str | int) -> Subscription:
        return self.subscribe_where(table, filters)

    def subscribe_where(self, table: str, where: Mapping[str, object]) -> Subscription:
        filters = normalize_filters(table, where)
        held = self._follow_table(table)
        initial = [held[key] for key in sorted(held) if matches(held[key], filters, {})]
        return self.subscriptions.open(table, filters, initial)

    # ── changes in ───────────────────────────────────────────────────────────

    def _follow_table(self, table: str) -> dict[str, Row]:
        """The rows of ``table`` (tombstones too), kept current from now on."""
        held = self._followed.get(table)
        if held is None:
            held, top = {}, 0
            for seq, row in self.view.put_since(table, 0):  # one statement: one snapshot
                held[row.key], top = row, seq
            for (t, key), row in self._pending.items():
                if t == table and (key not in held or newer(row, held[key])):
                    held[key] = row
            self._followed[table], self._seq[table] = held, top
            self._interest_grew.set()
        return held

    def follow(self) -> None:
        """Publish what the agent applied since the last look (nothing if the file did not
        change: SQLite's data_version is one cheap read)."""
        version = self.view.data_version()
        if version == self._data_version:
            return
        self._data_version = version
        changes: list[Change] = []
        for table in self._followed:
            changes += self._read_on(table, self._seq[table])
        if changes:
            self._publish(changes, tell_listeners=False)
        if self.table_listeners:  # of every table the agent put rows in, followed or not
            tops = self.view.tops()
            moved = {table for table, top in tops.items() if top > self._tops.get(table, 0)}
            self._tops = tops
            if moved:
                for listener in self.table_listeners:
                    listener(moved)

    def _reread(self) -> None:
        """The agent started a new life. It numbers the rows it puts on from the highest
        number in its view at start, which is below ours if the newest row was purged
        meanwhile: the next ``follow`` reads every followed table whole, publishes what
        differs from what we hold, tells table listeners of every table with rows, and
        follows on from the new numbers."""
        self._seq = dict.fromkeys(self._seq, 0)
        self._tops = {}
        self._data_version = -1

    def _read_on(self, table: str, since: int) -> list[Change]:
        """The followed ``table``'s rows the agent put after number ``since``, taken into
        what we hold (one newer than ours only: ours were published when written); our
        number for the table moves to the last one read."""
        held = self._followed[table]
        changes: list[Change] = []
        for seq, row in self.view.put_since(table, since):
            self._seq[table] = seq
            old = held.get(row.key)
            if old is None or newer(row, old):
                held[row.key] = row
                changes.append(Change(old, row))
        return changes

    def _publish(self, changes: list[Change], *, tell_listeners: bool = True) -> None:
        for change in changes:
            new = change.new
            if new is not None and new.table in self._followed:
                self._followed[new.table][new.key] = new
        self.keys.changed(changes)
        self.subscriptions.publish(changes)
        if changes and tell_listeners and self.table_listeners:
            tables = {c.new.table for c in changes if c.new is not None}
            for listener in self.table_listeners:
                listener(tables)

    def _interest(self) -> list[str] | None:
        """The tables whose changes we must hear of: every one when something listens to
        tables (the query API's subscriptions; listeners are added before ``start``), else
        the ones we follow a feed of."""
        return None if self.table_listeners else sorted(self._followed)

    async def _following(self) -> None:
        mark = ChangeMark()
        while True:
            self._interest_grew.clear()
            poll = asyncio.create_task(self._link.changes(mark, self._interest()))
            grew = asyncio.create_task(self._interest_grew.wait())
            try:  # a table followed from now on is asked about at once, not after this poll
                await asyncio.wait({poll, grew}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (poll, grew):
                    task.cancel()
            if poll.done() and not poll.cancelled():
                try:
                    answer = poll.result()
                except AgentUnavailable as exc:
                    log.debug("%s", exc)
                    await asyncio.sleep(RETRY)
                else:
                    if mark.epoch and answer.epoch != mark.epoch:
                        self._reread()
                    mark = answer
            try:
                self.follow()
            except sqlite3.Error:
                log.exception("reading the registry agent's view failed")
            await asyncio.sleep(FOLLOW_GAP)

    # ── changes out ──────────────────────────────────────────────────────────

    async def _hand(self, reply: SyncReply) -> Known:
        known = await self._link.hand(self.config.name, reply, self.own.floor)
        for where, row in list(self._pending.items()):
            if row.version in known:
                del self._pending[where]
        return known

    async def _handing(self) -> None:
        loop = asyncio.get_running_loop()
        audit = loop.time() + AUDIT_INTERVAL
        while True:
            if not self._behind and not self._unsent:
                with contextlib.suppress(TimeoutError):
                    await within(self._wake.wait(), max(0.0, audit - loop.time()))
            self._wake.clear()
            try:
                if self._behind or loop.time() >= audit:
                    await self.catch_up()
                    audit = loop.time() + AUDIT_INTERVAL
                elif self._unsent:
                    rows, self._unsent = self._unsent, []
                    try:
                        known = await self._hand(SyncReply(rows=rows))
                    except AgentUnavailable:
                        self._behind = True
                        raise
                    self._behind = known.missing > 0 and self._missed(known)
            except AgentUnavailable as exc:
                log.debug("%s", exc)
                await asyncio.sleep(RETRY)
            except Exception:
                log.exception("handing rows to the registry agent failed")
                await asyncio.sleep(RETRY)

    def _missed(self, known: Known) -> bool:
        """The agent lacks versions of ours below its top (a hand it never got)."""
        mine = self.own.known_of(self.config.name)
        return any(not known.covers(lo, hi) for lo, hi in mine.spans() if hi <= known.top)

    async def catch_up(self) -> None:
        """Hand the agent every version of ours it has not seen (first, if our store is
        new, take back what it holds of an earlier life of ours)."""
        self._unsent = []
        if self.own.full_sync:
            changes = self.own.apply_reply(await self._link.rows_of(self.config.name))
            self._publish([c for c in changes if c.new is not None and c.local])
            for change in changes:
                if change.local and change.new is not None:
                    self._pending[(change.new.table, change.new.key)] = change.new
        known = await self._hand(SyncReply())
        while True:
            reply = self.own.serve(SyncRequest(AGENT, {self.config.name: known}),
                                   max_rows=HAND_ROWS)
            if not (reply.rows or reply.vouched or reply.reset):
                break
            known = await self._hand(reply)
        self._behind = False

    async def _housekeeping(self) -> None:
        purge_every = max(1.0, min(60.0, self.config.tombstone_ttl / 4))
        while True:
            await asyncio.sleep(purge_every)
            try:
                self.own.purge()
            except sqlite3.Error:
                log.exception("purging this process's own registry rows failed")


def matches(row: Row, filters: Filters, unless: Filters) -> bool:
    """A live row whose indexed columns equal ``filters`` and differ from ``unless``."""
    if row.doc is None:
        return False
    values = TABLES[row.table].indexed(row.key, row.doc)
    return (all(values.get(name) == value for name, value in filters.items())
            and all(values.get(name) != value for name, value in unless.items()))



Registry = RegistryNode | HostedNode  # what a daemon holds: a replica of its own, or its host's


async def open_registry(config: RegistryConfig, agent_dir: Path | None, *,
                        registry: CollectorRegistry | None = None,
                        tls: InternalTls | None = None, wait: float = 30.0) -> Registry:
    """The daemon's registry: its host agent's (``agent_dir``), once the agent has made its
    view (it starts beside us), else a replica of its own."""
    if agent_dir is None:
        return RegistryNode(config, registry=registry, tls=tls)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while not (agent_dir / VIEW_NAME).exists() and loop.time() < deadline:
        await asyncio.sleep(0.1)
    return HostedNode(config, agent_dir)
