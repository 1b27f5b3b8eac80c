"""A page's event stream over an in-memory view: what it sends, and that it survives a bad
render."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import cast

from starlette.requests import Request

from bodega.broker.auth.tokens import Principal, Tokens
from bodega.broker.ui.calls import VisitorClients
from bodega.broker.ui.core.refusals import RecentRefusals
from bodega.broker.ui.gatekeeper import Gatekeeper, Visitor
from bodega.broker.ui.parts import Parts
from bodega.broker.ui.sources import ClusterView
from bodega.broker.ui.stream import EVERYTHING, Event, sse
from bodega.broker.view.catalog import Change, MemoryCatalog


class Flaky:
    """Renders the machines that changed; fails on its first render."""

    def __init__(self) -> None:
        self.renders = 0

    def wants(self, change: Change) -> bool:
        return change.table == "machines"

    async def render(self, changes: list[Change]) -> list[Event]:
        self.renders += 1
        if self.renders == 1:
            raise RuntimeError("a template bug")
        return [("seen", ",".join(c.key for c in changes if c != EVERYTHING))]


async def next_event(stream: AsyncIterator[bytes]) -> bytes:
    while True:
        chunk = await asyncio.wait_for(anext(stream), 10)
        if chunk.startswith(b"event:"):
            return chunk


async def test_a_failed_render_leaves_the_stream_open_for_the_next_change() -> None:
    catalog = MemoryCatalog()
    parts = Parts(view=ClusterView(catalog), api=VisitorClients("http://127.0.0.1:9"),
                  gate=Gatekeeper(Tokens(catalog, ("admin",))), refusals=RecentRefusals())
    visitor = Visitor(Principal("admin-0", admin=True), "admin", by_cookie=True)
    updater = Flaky()
    stream = sse(parts, cast(Request, None), visitor, updater)
    assert (await anext(stream)).startswith(b"retry:")
    reader = asyncio.ensure_future(next_event(stream))
    await asyncio.sleep(0)
    while updater.renders == 0:  # the opening render, which fails
        await asyncio.sleep(0.01)
    catalog.put("workers", "ams-1", {"name": "ams-1"})  # not wanted: nothing sent
    catalog.put("machines", "m1", {"id": "m1"})
    assert await reader == b"event: seen\ndata: m1\n\n"
    parts.closing.set()
    assert [chunk async for chunk in stream] == []  # closing ends it
