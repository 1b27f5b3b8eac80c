"""One Server-Sent Events stream per page, fed by the registry's subscriptions.

A page opens one ``EventSource``; its stream follows the broker's view
(``Catalog.changes``: worker and machine rows, membership), passes each change
to the page's ``Updater``, which says whether it matters and renders the
fragments it changes, each sent as an event named after the element it
replaces (htmx's SSE extension swaps it in). Changes that come close together
are rendered once (``COALESCE``). Other feeds (a machine's log lines, new
refusals) join the same stream. On open the stream renders the page's
fragments once, so nothing that changed between the page and its stream is
missed (and a reconnected page catches up); a heartbeat every ``HEARTBEAT``
keeps idle connections open and re-checks the visitor's token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Protocol

from starlette.requests import Request

from bodega.broker.ui.gatekeeper import Visitor
from bodega.broker.ui.parts import Parts
from bodega.broker.view.catalog import Change
from bodega.model.errors import Unauthorized

log = logging.getLogger("bodega.broker.ui.stream")

COALESCE = 0.1  # seconds to gather changes before rendering them
# A page whose fragments are costly to render (a region of a thousand workers) waits this
# many times its last render before the next, so an open page takes at most a fifth of a
# core however busy the cluster; never more than MOST_PAUSE, so a change still shows at once.
RENDER_SHARE = 4.0
MOST_PAUSE = 1.0
HEARTBEAT = 15.0
RESUBSCRIBE = 1.0  # after the view's feed failed (a lagging subscriber is cut off)
QUEUED = 10_000
EVERYTHING = Change("*", "*")  # render every fragment of the page
HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}

Event = tuple[str, str]  # (event name, HTML)


class Updater(Protocol):
    def wants(self, change: Change) -> bool:
        """Whether ``change`` can alter what the page shows."""
        ...

    async def render(self, changes: list[Change]) -> list[Event]:
        """The fragments ``changes`` alter (every fragment if ``EVERYTHING`` is among them)."""
        ...


def encode(event: str, data: str) -> bytes:
    lines = data.splitlines() or [""]
    return (f"event: {event}\n" + "".join(f"data: {line}\n" for line in lines) + "\n").encode()


async def sse(parts: Parts, request: Request, visitor: Visitor, updater: Updater,
              feeds: Iterable[AsyncIterator[Event]] = (),
              listen: Callable[[Callable[[], None]], Callable[[], None]] | None = None,
              ) -> AsyncIterator[bytes]:
    """The page's stream, until the browser goes away or the broker stops."""
    queue: asyncio.Queue[Change | Event] = asyncio.Queue(QUEUED)

    def offer(item: Change | Event) -> None:
        with contextlib.suppress(asyncio.QueueFull):  # a stuck page: the next full render
            queue.put_nowait(item)

    async def follow_view() -> None:
        while True:
            try:
                async for change in parts.view.catalog.changes():
                    if updater.wants(change):
                        offer(change)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # lagged behind the feed: start over, render it all
                log.info("dashboard stream lost the view's feed (%s); resubscribing", exc)
                await asyncio.sleep(RESUBSCRIBE)
                offer(EVERYTHING)

    async def follow(feed: AsyncIterator[Event]) -> None:
        async for event in feed:
            offer(event)

    tasks = [asyncio.create_task(follow_view()), *(asyncio.create_task(follow(f)) for f in feeds)]
    remove = listen(lambda: offer(EVERYTHING)) if listen is not None else None
    closing = asyncio.create_task(parts.closing.wait())
    try:
        yield b"retry: 2000\n: bodega dashboard stream\n\n"
        for event, data in await _rendered(updater, [EVERYTHING]):
            yield encode(event, data)
        pause = COALESCE
        while not parts.closing.is_set():
            batch = await _next_batch(queue, closing, pause)
            if batch is None:  # quiet for a while: is the visitor still allowed?
                if not _still_allowed(parts, visitor):
                    break
                yield b": ping\n\n"
                continue
            changes = [i for i in batch if isinstance(i, Change)]
            for item in batch:
                if not isinstance(item, Change):
                    yield encode(*item)
            if changes:
                began = time.perf_counter()
                rendered = await _rendered(updater, changes)
                spent = time.perf_counter() - began
                pause = max(COALESCE, min(MOST_PAUSE, RENDER_SHARE * spent))
                for event, data in rendered:
                    yield encode(event, data)
    finally:
        if remove is not None:
            remove()
        for task in [*tasks, closing]:
            task.cancel()
        for task in [*tasks, closing]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _rendered(updater: Updater, changes: list[Change]) -> list[Event]:
    """What the updater renders; nothing (and a line in the log) if it fails, so one bad
    render leaves the page as it was instead of ending its stream."""
    try:
        return await updater.render(changes)
    except Exception:
        log.exception("dashboard stream: rendering %d changes failed", len(changes))
        return []


async def _next_batch(queue: asyncio.Queue[Change | Event], closing: asyncio.Task[bool],
                      pause: float) -> list[Change | Event] | None:
    """What arrived (gathered for ``pause`` after the first change), or None after a quiet
    ``HEARTBEAT`` (or when the broker is stopping)."""
    getter = asyncio.create_task(queue.get())
    try:
        await asyncio.wait({getter, closing}, timeout=HEARTBEAT,
                           return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when the stream itself is cancelled (the browser went away)
        if not getter.done():
            getter.cancel()
    if not getter.done() or getter.cancelled():
        with contextlib.suppress(asyncio.CancelledError):
            await getter
        return None
    batch = [getter.result()]
    if isinstance(batch[0], Change):
        await asyncio.sleep(pause)
    while not queue.empty():
        batch.append(queue.get_nowait())
    return batch


def _still_allowed(parts: Parts, visitor: Visitor) -> bool:
    try:
        parts.gate.tokens.principal(visitor.token)
    except Unauthorized:
        return False
    return True
