"""A subscription's result before and after a re-run, told as changes to its rows.

Each row of a subscription's result has a number that stays with it while it
stays in the result (Corrosion's row id): a change names the row by its number.
A row is known by its first column: put the key first (``SELECT id, state FROM
machines``) and a machine whose state moves is one ``update`` of its row; one
that leaves the result is a ``delete``, a new one an ``insert`` with a new
number. Rows that share a first column (``SELECT state FROM machines``) are
matched by their values first; those left over are paired in order as updates,
and the rest are inserts or deletes. Numbers are never reused.

Deletes come first, in the old result's order, then updates and inserts in the
new result's order.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from bodega.wire.public.queries import ChangeKind, Value

Values = tuple[Value, ...]


class ResultRow(NamedTuple):  # a tuple: a result has thousands, built on every re-run
    number: int
    values: Values


class RowChange(NamedTuple):
    kind: ChangeKind
    number: int
    values: Values  # a delete's are the row's last values


@dataclass(frozen=True)
class Diff:
    changes: tuple[RowChange, ...]
    rows: tuple[ResultRow, ...]  # the new result, in its order, numbered
    next_number: int  # the number the next new row takes


def numbered(rows: Sequence[Values], first: int = 1) -> tuple[ResultRow, ...]:
    """A first result: its rows numbered in order from ``first``."""
    return tuple(ResultRow(first + i, values) for i, values in enumerate(rows))


def identity(values: Values) -> Value:
    return values[0] if values else None


def diff(old: Sequence[ResultRow], new: Sequence[Values], next_number: int) -> Diff:
    """The changes that turn ``old`` into ``new``; new rows are numbered from ``next_number``."""
    olds: dict[Value, list[ResultRow]] = defaultdict(list)
    for row in old:
        olds[identity(row.values)].append(row)
    news: dict[Value, list[int]] = defaultdict(list)  # identity -> positions in ``new``
    for position, values in enumerate(new):
        news[identity(values)].append(position)

    numbers: list[int | None] = [None] * len(new)
    kinds: list[ChangeKind | None] = [None] * len(new)  # None: the row did not change
    deleted: set[int] = set()
    for key in olds.keys() | news.keys():
        held = olds.get(key, [])
        positions = news.get(key, [])
        if len(held) == 1 and len(positions) == 1:  # a key: the row stayed, or changed
            numbers[positions[0]] = held[0].number
            if held[0].values != new[positions[0]]:
                kinds[positions[0]] = "update"
            continue
        # Rows equal in every value are the same row: kept, with its number.
        same: dict[Values, deque[ResultRow]] = defaultdict(deque)
        for row in held:
            same[row.values].append(row)
        unmatched: list[int] = []
        for position in positions:
            twins = same.get(new[position])
            if twins:
                numbers[position] = twins.popleft().number
            else:
                unmatched.append(position)
        kept = {numbers[p] for p in positions} - {None}
        left = [row for row in held if row.number not in kept]
        for row, position in zip(left, unmatched, strict=False):
            numbers[position], kinds[position] = row.number, "update"
        for position in unmatched[len(left):]:
            kinds[position] = "insert"  # numbered below, in the new result's order
        deleted.update(row.number for row in left[len(unmatched):])

    changes = [RowChange("delete", row.number, row.values) for row in old
               if row.number in deleted]
    rows: list[ResultRow] = []
    for position, values in enumerate(new):
        number, kind = numbers[position], kinds[position]
        if number is None:
            number, next_number = next_number, next_number + 1
        rows.append(ResultRow(number, values))
        if kind is not None:
            changes.append(RowChange(kind, number, values))
    return Diff(tuple(changes), tuple(rows), next_number)
