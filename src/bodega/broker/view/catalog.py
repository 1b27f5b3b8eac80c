"""What the broker reads and writes of the cluster view, as one narrow seam.

The broker holds nothing durable: workers, machines and volumes come from
the registry view (written by the workers that own them); apps and tokens
are shared rows any broker may write, last writer wins. ``Catalog`` is that
seam. ``RegistryCatalog`` is the real one over the embedded registry node;
``MemoryCatalog`` is an in-process fake with the same behaviour for tests.

A row is a JSON document (the registry keeps any); read with its table's model
(``rows(WorkerRow)``, ``get(Machine, machine_id)``: ``model/rows``) it comes back as
that model, a row the model cannot read left out (``model.answer.from_doc``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, overload

from bodega.model.machine import rfc3339
from bodega.model.rows import Doc, Row, TypedReads
from bodega.wire.public.platform import Member

R = TypeVar("R", bound=Row)

# Indexed fields per table that ``rows(**filters)`` may match on.
INDEXED: dict[str, tuple[str, ...]] = {
    "workers": ("name", "region"),
    "machines": ("id", "app", "name", "region", "worker", "state"),
    "volumes": ("id", "app", "name", "region", "worker", "state"),
    "apps": ("name", "org_slug"),
    "tokens": ("id", "token_hash", "scope"),
    "ip_assignments": ("key", "app", "ip"),
    "releases": ("id", "app", "version"),
    "secrets": ("key", "app"),
    "secretkeys": ("key", "app"),
    "jobs": ("id", "app", "name", "pool", "state", "home"),
    "sched_workers": ("worker", "pool"),
    "certificates": ("key", "app"),
    "join_tokens": ("id", "server"),
    "join_uses": ("key", "token"),
    "autoscale": ("app", "min"),
    "autoscale_runs": ("app", "holder"),
}


@dataclass(frozen=True)
class Change:
    """Something in the view changed: a row (``table``/``key``) or a member's status."""

    table: str  # a table name, or "members"
    key: str


class Catalog(Protocol):
    """Reads as ``model.rows.TypedReads`` reads: by a table's name, documents; by a row
    model (``WorkerRow``), that model."""

    @overload
    def get(self, table: str, key: str) -> Doc | None: ...

    @overload
    def get(self, table: type[R], key: str) -> R | None: ...

    @overload
    def rows(self, table: str, without: Mapping[str, str | int] | None = None, /,
             **filters: str | int) -> list[Doc]: ...

    @overload
    def rows(self, table: type[R], without: Mapping[str, str | int] | None = None, /,
             **filters: str | int) -> list[R]: ...

    def put_shared(self, table: str, key: str, doc: Doc) -> None: ...

    def delete_shared(self, table: str, key: str) -> None: ...

    def member_status(self, name: str) -> str | None:
        """alive, suspect, dead or left; None for a name membership has never seen."""
        ...

    def members(self) -> list[Member]: ...

    def changes(self) -> AsyncIterator[Change]:
        """Every change from now on, for caches built on the view."""
        ...


class MemoryCatalog(TypedReads):
    """A catalog held in dicts: what tests and single-process simulations use."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Doc]] = {t: {} for t in INDEXED}
        self.statuses: dict[str, str] = {}
        self.member_info: dict[str, Member] = {}
        self._queues: list[asyncio.Queue[Change]] = []

    def _doc(self, table: str, key: str) -> Doc | None:
        doc = self.tables[table].get(key)
        return None if doc is None else dict(doc)

    def _docs(self, table: str, without: Mapping[str, str | int] | None,
              filters: Mapping[str, str | int]) -> list[Doc]:
        without = without or {}
        for name in (*filters, *without):
            if name not in INDEXED[table]:
                raise ValueError(f"{table}.{name} is not an indexed column")
        return [dict(doc) for doc in self.tables[table].values()
                if all(doc.get(k) == v for k, v in filters.items())
                and all(doc.get(k) != v for k, v in without.items())]

    def put(self, table: str, key: str, doc: Doc) -> None:
        """Write any row (in the real view, owned rows come from their workers)."""
        self.tables[table][key] = dict(doc)
        self._notify(Change(table, key))

    def delete(self, table: str, key: str) -> None:
        self.tables[table].pop(key, None)
        self._notify(Change(table, key))

    def put_shared(self, table: str, key: str, doc: Doc) -> None:
        self.put(table, key, doc)

    def delete_shared(self, table: str, key: str) -> None:
        self.delete(table, key)

    def set_status(self, name: str, status: str, **info: Any) -> None:
        self.statuses[name] = status
        self.member_info[name] = Member.model_validate({"name": name, "status": status,
                                                        "since": rfc3339(time.time()),
                                                        **info})
        self._notify(Change("members", name))

    def member_status(self, name: str) -> str | None:
        return self.statuses.get(name)

    def members(self) -> list[Member]:
        return list(self.member_info.values())

    def _notify(self, change: Change) -> None:
        for queue in self._queues:
            queue.put_nowait(change)

    async def changes(self) -> AsyncIterator[Change]:
        queue: asyncio.Queue[Change] = asyncio.Queue()
        self._queues.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            with contextlib.suppress(ValueError):
                self._queues.remove(queue)
