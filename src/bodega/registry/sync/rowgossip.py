"""Rows on gossip: a node's changes out through membership, rows heard applied in batches.

A local change becomes an item (``rowwire.row_item``: the row, compressed,
or a notice that it exists) that membership broadcasts, and is pushed at
once to a few random members. An item heard is decoded and queued;
everything heard in one loop turn is applied in one transaction. A pushed
item that was news is gossiped on under its own key, so the cluster-wide
seen-set still drops duplicates. A host's agent also pushes a row that was
news to it on to as many members again, once (infect and die, as Corrosion's
broadcasts go: gossip alone carries a row or two per packet, so under a
steady stream of writes most rows waited for the next pull). Each agent
pushes a row at most once: a row costs each host about ``eager_peers``
packets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import Protocol

from bodega.registry.membership.core.messages import DecodeError, Item
from bodega.registry.membership.core.outputs import Delivered, Event, ItemTooLarge, UnknownMember
from bodega.registry.replication.core.rows import Change, Row
from bodega.registry.replication.metrics import ReplicationMetrics
from bodega.registry.replication.replica import Replica
from bodega.registry.sync.core.rowwire import decode_item, is_row_item, item_floor, row_item

log = logging.getLogger("bodega.registry")

Applied = Callable[[list[Change], str], None]  # (changes, source: "gossip")
Heard = tuple[Row | tuple[str, int], Item, bool]  # (row or notice, the item, pushed to us)


class Spreader(Protocol):
    """What rows go out through: membership (``membership.udp.Membership``)."""

    def holders(self) -> list[str]: ...

    def broadcast(self, item: Item) -> None: ...

    def send_direct(self, name: str, item: Item) -> None: ...


class RowGossip:
    def __init__(self, name: str, replica: Replica, membership: Spreader,
                 metrics: ReplicationMetrics, *, eager_peers: int, rng: random.Random,
                 on_changes: Applied, stopped: Callable[[], bool], push_on: bool) -> None:
        """``push_on``: rows new here go on to ``eager_peers`` members (a host's agent; a
        daemon keeping a replica of its own on a host of many does not, or each row would
        cost that host ``eager_peers`` packets per process)."""
        self.name = name
        self.replica = replica
        self.membership = membership
        self.metrics = metrics
        self.eager_peers = eager_peers
        self.push_on = push_on
        self._rng = rng
        self._on_changes = on_changes
        self._stopped = stopped  # the node is stopping: what is heard now is dropped
        self._inbox: list[Heard] = []

    def broadcast(self, row: Row, floor: int | None = None) -> None:
        """Send a row on its way: on gossip, and pushed to a few members now. A row of
        ours carries our floor; one a process on this host handed us, ``floor``, its own."""
        item = row_item(row, self.replica.floor if floor is None else floor)
        form = "notice" if "n" in item.data else "zrow" if "z" in item.data else "row"
        self.metrics.items.labels(form).inc()
        try:
            self.membership.broadcast(item)
        except ItemTooLarge:  # cannot happen below ITEM_BUDGET; a notice always fits
            log.warning("row item %s did not fit a packet", item.key)
            return
        self._push(item)

    def _push(self, item: Item) -> None:
        """Hand ``item`` straight to a few members: they start gossiping it a round earlier."""
        # Members holding a replica only (a host's other processes read their agent's),
        # sampled in O(eager_peers): an agent pushes every row new to it.
        peers = self.membership.holders()
        for name in self._rng.sample(peers, min(self.eager_peers, len(peers))):
            with contextlib.suppress(UnknownMember, ItemTooLarge):
                self.membership.send_direct(name, item)

    def heard(self, out: Event | Delivered) -> None:
        """Membership's listener: queue every row item for this loop turn's batch."""
        if isinstance(out, Event) or not is_row_item(out.item):
            return
        try:
            decoded = decode_item(out.item)
        except DecodeError:
            self.metrics.bad_items.inc()
            return
        if not self._inbox:
            asyncio.get_running_loop().call_soon(self._flush)
        self._inbox.append((decoded, out.item, out.direct))

    def _flush(self) -> None:
        """Apply every row heard since the last loop turn, in one transaction."""
        inbox, self._inbox = self._inbox, []
        if self._stopped():
            return
        try:
            fresh = self._apply_heard(inbox)
        except Exception:  # a replica error must not take the gossip listener down
            log.exception("applying %d gossiped items failed", len(inbox))
            return
        for decoded, item, direct in fresh:
            if direct:
                # A pushed item is not re-gossiped by membership; join its epidemic
                # under the same key, so the cluster-wide seen-set still de-duplicates.
                with contextlib.suppress(ItemTooLarge):
                    self.membership.broadcast(item)
            # News here, and taken (a refused row is never known, so it is not sent on,
            # or every member would push it again each time it heard it): on to a few
            # members more, once.
            if self.push_on and isinstance(decoded, Row) and \
                    decoded.version in self.replica.known_of(decoded.owner):
                self._push(item)

    def _apply_heard(self, inbox: list[Heard]) -> list[Heard]:
        """Apply rows and notices; what was news here: each row of another origin once
        (pushed on), and the notices that came pushed (gossiped on)."""
        rows: list[Row] = []
        fresh: dict[tuple[str, int, bool], Heard] = {}  # (origin, version, a notice)
        floors: dict[str, int] = {}
        for decoded, item, direct in inbox:
            owner = decoded.owner if isinstance(decoded, Row) else decoded[0]
            with contextlib.suppress(DecodeError):
                floors[owner] = max(floors.get(owner, 0), item_floor(item))
            if not isinstance(decoded, Row):
                self.replica.notice(*decoded)
                if direct and owner != self.name:
                    fresh[(*decoded, True)] = (decoded, item, True)
            elif owner == self.name:
                rows.append(decoded)  # ours from an earlier life tells the replica so
            elif decoded.version not in self.replica.known_of(owner):
                # A version seen here already (applied, or superseded) changes nothing: it
                # is not applied again. Pushed on, most rows come four or five times.
                key = (owner, decoded.version, False)
                seen = fresh.get(key)
                if seen is None:
                    rows.append(decoded)
                fresh[key] = (decoded, item, direct or (seen is not None and seen[2]))
        floors = {origin: floor for origin, floor in floors.items()
                  if floor and origin != self.name
                  and not self.replica.known_of(origin).covers(1, floor)}
        if rows or floors:  # else a batch of copies: nothing to write
            self._on_changes(self.replica.apply(rows, floors=floors), "gossip")
        return list(fresh.values())
