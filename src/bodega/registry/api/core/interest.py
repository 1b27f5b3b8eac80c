"""Which subscriptions a change to the replica touches, and whether one came meanwhile.

A subscription's query reads some replicated tables (the read policy names
them as SQLite prepares it); a change to any other table cannot change its
result, so only subscriptions reading a changed table re-run. The agent says
which tables changed; ``Stamps`` counts those calls per table, so that a
subscription made while its tables changed is re-run once made (its first
result may have been read just before the change).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def touched(interests: Mapping[str, frozenset[str]], changed: Iterable[str]) -> set[str]:
    """The subscriptions (by id) whose tables include one of ``changed``."""
    tables = set(changed)
    return {sub for sub, read in interests.items() if read & tables}


class Stamps:
    """How many times each table was said to change."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def bump(self, tables: Iterable[str]) -> None:
        for table in set(tables):
            self._counts[table] = self._counts.get(table, 0) + 1

    def snapshot(self) -> Mapping[str, int]:
        return dict(self._counts)

    def moved(self, since: Mapping[str, int], tables: Iterable[str]) -> bool:
        """Whether any of ``tables`` changed after ``since`` was taken."""
        return any(self._counts.get(t, 0) != since.get(t, 0) for t in tables)
