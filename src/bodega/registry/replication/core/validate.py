"""Checks every row must pass before a replica applies it.

A replica applies what any authenticated peer relays, so one bad row must
not be able to poison the view, crash the apply loop or fill the disk
(Corrosion's 2024 outage began with a single bad record). A row is refused,
with a short reason that becomes a metric label, when:

- its table is unknown, its key empty or too long, its owner not a member name;
- its document is not an object, is too large, or lacks an indexed column
  of the right type (reads filter on those, so they must be sound);
- it claims an owner its own content contradicts (a machine whose
  ``worker`` is not the node that sent it as owner).

Whether a valid row is *newer* than what the replica holds is ``merge``'s
business, not this module's.
"""

from __future__ import annotations

import json

from bodega.registry.membership.core.members import MAX_NAME
from bodega.registry.replication.core.rows import Row
from bodega.registry.replication.core.schema import TABLES

MAX_KEY = 200
MAX_DOC_BYTES = 64 * 1024
MAX_FIELD = 512  # an indexed string column
MAX_INT = 2**62


def problem(row: Row) -> str | None:
    """Why ``row`` must be refused, as a metric-friendly reason; None if it is sound."""
    spec = TABLES.get(row.table)
    if spec is None:
        return "table"
    if not row.key or len(row.key) > MAX_KEY or not row.key.isprintable():
        return "key"
    if not row.owner or len(row.owner) > MAX_NAME or not row.owner.isprintable():
        return "owner"
    if not 1 <= row.version < MAX_INT or not 0 <= row.stamp.wall_ms < MAX_INT:
        return "version"
    if row.stamp.node != row.owner:
        return "stamp"
    doc = row.doc
    if doc is not None:
        try:
            size = len(json.dumps(doc, separators=(",", ":")))
        except (TypeError, ValueError, RecursionError):
            return "doc"
        if size > MAX_DOC_BYTES:
            return "size"
        if spec.key in doc and doc[spec.key] != row.key:
            return "key"
        for column in spec.columns:
            value = doc.get(column.name)
            if value is None:
                if column.required:
                    return f"field:{column.name}"
                continue
            if column.type is bool:
                ok = isinstance(value, bool)
            elif column.type is int:
                ok = type(value) is int and -MAX_INT < value < MAX_INT
            else:
                ok = isinstance(value, str) and len(value) <= MAX_FIELD
            if not ok:
                return f"field:{column.name}"
    claimed = spec.owner_of(row.key, doc)
    if spec.ownership is not None and claimed is not None and claimed != row.owner:
        return "owner"
    if spec.ownership in ("key", "key-prefix") and claimed is None:
        return "owner"
    if spec.name == "images" and doc is not None and row.key != f"{doc['worker']}/{doc['ref']}":
        return "key"
    return None
