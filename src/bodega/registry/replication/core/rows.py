"""A replicated row and the merge rule: which of two versions of a row a replica keeps.

``merge`` is a pure function, and it is a total order's maximum, which is
what makes replicas converge whatever order rows arrive in, however often:
it is commutative, associative and idempotent (property-tested).

- owned tables: the higher version wins (only the owner writes, its counter
  only rises); a machine's row, which a move hands to another owner, is ranked by its
  generation first (``generation``);
- shared tables: the greater hybrid-clock stamp wins (last writer wins, the
  writer's name breaking ties inside the stamp).

The remaining fields break the ties honest nodes never produce (two rows
with the same version or stamp but different content, from a node that lost
its counter), so even then every replica picks the same row: a tombstone
over a live row, then the larger document in canonical JSON, as cr-sqlite
picks the larger value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bodega.model.json import JsonObject
from bodega.registry.replication.core.hlc import Stamp
from bodega.registry.replication.core.schema import TABLES, Kind

# A row's document: whatever its writer publishes (a machine as its API renders it), JSON
# with no schema of the registry's own; the indexed columns are read out of it (schema.py).
# The registry stores and gossips it as it came: a JSON object at the edge, which the row
# models (model/rows) read on the other side.
Document = JsonObject


@dataclass(frozen=True)
class Row:
    table: str
    key: str
    doc: Document | None  # None: a tombstone
    owner: str  # owned tables: the owner; shared tables: the writer
    version: int  # the owner's (writer's) counter at this write: what anti-entropy tracks
    stamp: Stamp  # when it was written; the order of shared rows

    @property
    def deleted(self) -> bool:
        return self.doc is None

    @property
    def shared(self) -> bool:
        return TABLES[self.table].kind is Kind.SHARED


@dataclass(frozen=True)
class Change:
    """A row a replica now holds differently; ``new`` None: it was dropped (reset)."""

    old: Row | None
    new: Row | None
    local: bool = False  # written by this node: the shell broadcasts it


def canonical(doc: Document | None) -> str:
    return "" if doc is None else json.dumps(doc, sort_keys=True, separators=(",", ":"))


# A machine moves between workers (``worker/core/moves.py``): two owners then write its
# row, each with its own counter, so the row of the newest generation (one more at each
# move, carried in the document) wins whatever the counters say, and only such a row may
# take a key from its owner. A tombstone is of generation 0: a moved machine's worker
# never deletes its row (``worker/publish.py``), which would lose to its own live rows.
GENERATIONS = frozenset({"machines", "volumes"})


def generation_of(table: str, doc: Document | None) -> int:
    """A row's generation: 0 but in a table whose rows move between owners."""
    if table not in GENERATIONS or doc is None:
        return 0
    value = doc.get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def generation(row: Row) -> int:
    return generation_of(row.table, row.doc)


def _rank(row: Row) -> tuple[Any, ...]:
    s = row.stamp
    if row.shared:
        return (s.wall_ms, s.logical, s.node, row.owner, row.version, row.deleted)
    return (generation(row), row.version, row.owner, s.wall_ms, s.logical, s.node,
            row.deleted)


def newer(a: Row, b: Row) -> bool:
    """Whether ``a`` replaces ``b`` (two versions of the same row)."""
    ra, rb = _rank(a), _rank(b)
    if ra != rb:
        return ra > rb
    return canonical(a.doc) > canonical(b.doc)


def merge(a: Row, b: Row) -> Row:
    """The version of a row every replica keeps, given two of them."""
    if (a.table, a.key) != (b.table, b.key):
        raise ValueError(f"cannot merge {a.table}/{a.key} with {b.table}/{b.key}")
    return a if not newer(b, a) else b
