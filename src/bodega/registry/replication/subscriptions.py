"""Subscriptions: a query's current rows, then every change to its result, as applied here.

``subscribe("machines", app="web")`` yields the matching rows (kind
``initial``), then, as the replica applies changes, ``insert`` when a row
enters the result, ``update`` when a row in it changes, ``delete`` when it
leaves (deleted, or no longer matching the filters). Changes are fed in
the same call that applied them, so nothing can fall between the initial
rows and the first change.

A consumer that falls ``capacity`` changes behind is cut off with
``FeedLagged`` instead of silently missing changes (a proxy that lost a
"machine stopped" would route to it forever); it subscribes again and gets
a fresh snapshot. Corrosion disconnects lagging subscribers the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from bodega.model.json import JsonObject
from bodega.registry.feed import Feed
from bodega.registry.replication.rows import Change, Document, Row
from bodega.registry.replication.schema import TABLES, Filters

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
