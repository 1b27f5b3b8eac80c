"""Where membership's events and received items go: listeners called inline, and feeds.

A listener (replication's gossip intake) runs on the event loop between
packets and must not block; a failing one is logged, never allowed to stop
the others. A feed is a bounded stream for one consumer (``feed.py``),
closed when membership stops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bodega.registry.membership.core.outputs import Delivered, Event
from bodega.registry.membership.feed import Feed

log = logging.getLogger("bodega.registry.membership")

Listener = Callable[[Event | Delivered], None]


class Fanout:
    def __init__(self, feed_capacity: int) -> None:
        self._capacity = feed_capacity
        self._listeners: list[Listener] = []
        self._event_feeds: list[Feed[Event]] = []
        self._item_feeds: list[Feed[Delivered]] = []

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def events(self) -> Feed[Event]:
        feed: Feed[Event] = Feed(self._capacity, self._event_feeds.remove)
        self._event_feeds.append(feed)
        return feed

    def items(self) -> Feed[Delivered]:
        feed: Feed[Delivered] = Feed(self._capacity, self._item_feeds.remove)
        self._item_feeds.append(feed)
        return feed

    def deliver(self, out: Event | Delivered) -> None:
        if isinstance(out, Event):
            for event_feed in list(self._event_feeds):
                event_feed.put(out)
        else:
            for item_feed in list(self._item_feeds):
                item_feed.put(out)
        for listener in list(self._listeners):
            try:
                listener(out)
            except Exception:
                log.exception("membership listener failed")

    def close(self) -> None:
        for event_feed in list(self._event_feeds):
            event_feed.close()
        for item_feed in list(self._item_feeds):
            item_feed.close()
