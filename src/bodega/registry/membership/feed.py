"""A bounded async stream for one consumer: membership's events or items, a subscription's changes.

A consumer that falls behind is cut off with ``FeedLagged`` rather than
silently missing events: a listener that lost a "dead" event would keep a
ghost member forever (Corrosion #566). On ``FeedLagged`` the consumer re-reads
``members()`` and subscribes again.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class FeedLagged(Exception):
    """The consumer fell more than the feed's capacity behind; events were lost."""


class Feed(Generic[T]):
    def __init__(self, capacity: int, on_close: Callable[[Feed[T]], None]) -> None:
        self._items: deque[T] = deque()
        self._capacity = capacity
        self._on_close = on_close
        self._wakeup = asyncio.Event()
        self.closed = False
        self.lagged = False

    def put(self, item: T) -> None:
        if self.closed:
            return
        if len(self._items) >= self._capacity:
            self.lagged = True
            self.close()
            return
        self._items.append(item)
        self._wakeup.set()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._wakeup.set()
            self._on_close(self)

    def __aiter__(self) -> Feed[T]:
        return self

    async def __anext__(self) -> T:
        while not self._items:
            if self.closed:
                if self.lagged:
                    raise FeedLagged(f"consumer fell {self._capacity} items behind")
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()
        return self._items.popleft()

    def __enter__(self) -> Feed[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
