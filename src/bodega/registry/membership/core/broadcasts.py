"""What rides on outgoing packets: queues with a transmit limit, and a seen-set.

Each queued value is sent at most ``limit`` times (``4·ceil(log10(n+1))``),
least-sent first, as memberlist's TransmitLimitedQueue does: fresh news
travels before news most members have already heard. A value queued again
under the same key replaces the old one (a newer claim about the same member
makes the old one worthless).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import MemberRecord
from bodega.registry.membership.core.messages import (
    SECTION_OVERHEAD,
    Body,
    Direct,
    Item,
    Message,
    Sync,
    encode,
    encoded_size,
)
from bodega.registry.membership.core.outputs import ItemTooLarge

T = TypeVar("T")
# A scan that found this many values in a row too large for the room left
# stops: with thousands queued (a mass join), scanning the whole queue for
# every packet made dissemination cost O(queue) per packet.
MAX_MISSES = 16
ITEM_SHARE = 0.75  # of a packet's free room, what row items may take while updates wait


@dataclass
class _Entry(Generic[T]):
    value: T
    size: int
    transmits: int = 0


class TransmitQueue(Generic[T]):
    """Values bucketed by how often they were sent; within a bucket, latest arrival first."""

    def __init__(self, max_entries: int | None = None) -> None:
        self._entries: dict[str, _Entry[T]] = {}
        self._buckets: list[dict[str, _Entry[T]]] = [{}]  # index: transmits so far
        self._max = max_entries
        self.dropped = 0  # values evicted before their last transmit (queue full)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def push(self, key: str, value: T, size: int) -> None:
        self._remove(key)
        entry = _Entry(value, size)
        self._entries[key] = entry
        self._buckets[0][key] = entry
        if self._max is not None and len(self._entries) > self._max:
            # Evict the most-sent (then oldest): most members already have it.
            worst = next(iter(next(b for b in reversed(self._buckets) if b)))
            self._remove(worst)
            self.dropped += 1

    def transmits(self, key: str) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.transmits

    def take(self, budget: int, limit: int) -> tuple[list[T], int]:
        """Values whose sizes, plus one separator each, fit in ``budget``, and the bytes they use.

        Each value taken counts one transmit; values at the limit are dropped.
        """
        if not self._entries or budget <= 0:
            return [], 0
        room = budget
        misses = 0
        taken: list[tuple[str, _Entry[T]]] = []
        for transmits, bucket in enumerate(self._buckets):
            if transmits >= limit:  # the limit shrank with the cluster: these are done
                for key in list(bucket):
                    self._remove(key)
                continue
            for key in reversed(bucket):
                entry = bucket[key]
                if entry.size < room:
                    room -= entry.size + 1
                    taken.append((key, entry))
                    misses = 0
                else:
                    misses += 1
                if room <= 1 or misses >= MAX_MISSES:
                    break
            if room <= 1 or misses >= MAX_MISSES:
                break
        for key, entry in taken:
            del self._buckets[entry.transmits][key]
            entry.transmits += 1
            if entry.transmits >= limit:
                del self._entries[key]
                continue
            if entry.transmits == len(self._buckets):
                self._buckets.append({})
            self._buckets[entry.transmits][key] = entry
        return [entry.value for _, entry in taken], budget - room

    def _remove(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            del self._buckets[entry.transmits][key]


class SeenKeys:
    """Recently seen broadcast keys, bounded in count and age."""

    def __init__(self, max_keys: int, ttl: float) -> None:
        self._keys: OrderedDict[str, float] = OrderedDict()
        self._max = max_keys
        self._ttl = ttl

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, now: float, key: str) -> bool:
        """Remember ``key``; True if it was not seen (within the TTL) before."""
        while self._keys:
            oldest, expires = next(iter(self._keys.items()))
            if expires > now and len(self._keys) < self._max:
                break
            del self._keys[oldest]
        if key in self._keys:
            return False
        self._keys[key] = now + self._ttl
        return True


class Piggyback:
    """Membership updates and broadcast items waiting to ride on packets, and the packing.

    A packet is its body plus as many queued records, then items, as fit in
    the payload budget (UDP payload minus the envelope). Sizes are counted
    from each value's own encoding, which is exactly what it adds inside the
    message, so packing never needs a trial encode.
    """

    def __init__(self, config: SwimConfig) -> None:
        self._budget = config.payload_budget
        self.updates: TransmitQueue[MemberRecord] = TransmitQueue()
        self.items: TransmitQueue[Item] = TransmitQueue(config.max_queued_items)
        self._seen = SeenKeys(config.seen_items, config.seen_item_ttl)

    @property
    def pending(self) -> bool:
        return bool(self.updates) or bool(self.items)

    def queue_update(self, record: MemberRecord) -> None:
        self.updates.push(record.name, record, encoded_size(record))

    def queue_item(self, now: float, sender: str, item: Item) -> None:
        if len(encode(Message(sender, items=(item,)))) > self._budget:
            raise ItemTooLarge(f"item {item.key!r} does not fit in one packet")
        self._seen.add(now, item.key)
        self.items.push(item.key, item, encoded_size(item))

    def check_direct(self, sender: str, item: Item) -> None:
        if len(encode(Message(sender, Direct(item)))) > self._budget:
            raise ItemTooLarge(f"item {item.key!r} does not fit in one packet")

    def received_item(self, now: float, item: Item) -> bool:
        """True the first time ``item`` arrives; it is then passed on like our own."""
        if not self._seen.add(now, item.key):
            return False
        self.items.push(item.key, item, encoded_size(item))
        return True

    def message(self, sender: str, body: Body, limit: int,
                lead: MemberRecord | None = None) -> Message:
        """``body`` plus as much queued news as fits; ``lead`` goes first, unconditionally.

        Row items are packed before membership updates, up to ``ITEM_SHARE`` of
        the room while updates wait: packing membership first let a mass join's
        backlog of member records starve row changes for seconds.
        """
        room = self._budget - len(encode(Message(sender, body)))
        updates: list[MemberRecord] = []
        if lead is not None:
            updates.append(lead)
            room -= SECTION_OVERHEAD + encoded_size(lead) + 1
        items: list[Item] = []
        if self.items:
            share = int(room * ITEM_SHARE) if self.updates else room
            items, used = self.items.take(share - SECTION_OVERHEAD, limit)
            if items:
                room -= SECTION_OVERHEAD + used
        reserve = 0 if updates else SECTION_OVERHEAD
        taken, _ = self.updates.take(room - reserve, limit)
        updates += taken
        return Message(sender, body, tuple(updates), tuple(items))

    def sync_messages(self, sender: str, records: list[MemberRecord],
                      reply: bool, *, digest: tuple[int, ...] | None = None,
                      want: tuple[int, ...] = ()) -> list[Message]:
        """``records`` in as many packets as it takes; only the first asks for a reply
        and carries ``digest`` and ``want``."""
        room = self._budget - len(encode(Message(sender, Sync((), True, digest, want))))
        chunks: list[list[MemberRecord]] = [[]]
        left = room
        for record in records:
            size = encoded_size(record) + 1
            if size > left and chunks[-1]:
                chunks.append([])
                left = room
            chunks[-1].append(record)
            left -= size
        return [Message(sender, Sync(tuple(c), reply and i == 0, *((digest, want) if i == 0
                                                                  else (None, ()))))
                for i, c in enumerate(chunks)]
