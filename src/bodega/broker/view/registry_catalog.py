"""The broker's catalog over its embedded registry node (the real view)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping

from bodega.broker.view.catalog import Change
from bodega.model.machine import rfc3339
from bodega.model.rows import Doc, TypedReads
from bodega.registry import Registry
from bodega.wire.public.platform import Member


class RegistryCatalog(TypedReads):
    def __init__(self, node: Registry) -> None:
        self.node = node

    def _doc(self, table: str, key: str) -> Doc | None:
        return self.node.get(table, key)

    def _docs(self, table: str, without: Mapping[str, str | int] | None,
              filters: Mapping[str, str | int]) -> list[Doc]:
        return self.node.rows(table, without, **filters)

    def put_shared(self, table: str, key: str, doc: Doc) -> None:
        self.node.put_shared(table, key, doc)

    def delete_shared(self, table: str, key: str) -> None:
        self.node.delete_shared(table, key)

    def member_status(self, name: str) -> str | None:
        member = self.node.membership.member(name)
        return None if member is None else str(member.status)

    def members(self) -> list[Member]:
        membership = self.node.membership
        return [Member.model_validate({**m.to_json(), "since": None if since is None
                                       else rfc3339(since)})
                for m in self.node.members()
                for since in [membership.status_since(m.name)]]

    async def changes(self) -> AsyncIterator[Change]:
        """Worker, machine and job rows and membership changes, merged; raises if a feed
        lagged."""
        queue: asyncio.Queue[Change | BaseException] = asyncio.Queue()

        async def rows(table: str) -> None:
            try:
                with self.node.subscribe(table) as sub:
                    async for change in sub:
                        if change.kind != "initial":
                            queue.put_nowait(Change(table, change.key))
            except Exception as exc:
                queue.put_nowait(exc)

        async def members() -> None:
            try:
                with self.node.membership.events() as feed:
                    async for event in feed:
                        queue.put_nowait(Change("members", event.member.name))
            except Exception as exc:
                queue.put_nowait(exc)

        tasks = [asyncio.create_task(rows("workers")), asyncio.create_task(rows("machines")),
                 asyncio.create_task(rows("jobs")), asyncio.create_task(members())]
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
