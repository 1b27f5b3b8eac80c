"""The tables a user may query, and the views that show them their live rows.

Every replicated table (``replication/core/schema.py``) is shown under its own name,
except those holding what a token must not hand out (token hashes, keys, sealed
secrets). A shown table has its key, its indexed columns and ``doc`` (the
document as JSON text, for ``json_extract``); its bookkeeping (the ``_``
columns) and its tombstones are left out.

A user's SQL names ``machines``; a TEMP VIEW of that name shadows the raw table
of the replica. That view reads a second one, ``live_<nonce>_machines``, which
alone reads the raw table: the read policy (``policy.py``) lets the raw tables
be read only from inside those, and the nonce is drawn per connection, so a
user's own WITH clause named ``machines`` cannot pass for the view and read the
raw rows (SQLite names the innermost view *or* common table expression behind
a read).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bodega.registry.replication.core.schema import TABLES

DOC = "doc"

# Tables never shown, and why: what they hold would hand out more than the cluster's view.
HIDDEN: Mapping[str, str] = {
    "tokens": "API tokens' hashes",
    "keyrings": "the gossip keys, in the clear",
    "secrets": "apps' secrets (sealed)",
    "secretkeys": "apps' secret keys (sealed)",
    "certificates": "the edge's private keys (sealed)",
    "join_tokens": "join tokens' hashes",
    "join_uses": "which join token let which host in (the servers' book, not the view's)",
}


@dataclass(frozen=True)
class PublicTable:
    name: str
    key: str
    indexed: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.key, *self.indexed, DOC)


PUBLIC: Mapping[str, PublicTable] = {
    name: PublicTable(name, spec.key, spec.column_names)
    for name, spec in TABLES.items() if name not in HIDDEN
}


def live_view(table: str, nonce: str) -> str:
    """The name of the view that alone reads ``table``'s raw rows on one connection."""
    return f"live_{nonce}_{table}"


def views(nonce: str) -> list[str]:
    """The statements that make a connection's views (run before its read policy is set)."""
    made: list[str] = []
    for table in PUBLIC.values():
        inner = live_view(table.name, nonce)
        picked = ", ".join([*table.columns[:-1], f"_doc AS {DOC}"])
        made.append(f'CREATE TEMP VIEW "{inner}" AS SELECT {picked} '
                    f'FROM main."{table.name}" WHERE _deleted = 0')
        made.append(f'CREATE TEMP VIEW "{table.name}" AS SELECT * FROM "{inner}"')
    return made


def tables_line() -> str:
    return "the tables you may query: " + ", ".join(sorted(PUBLIC))


def unknown_table(name: str) -> str:
    return f"no such table: {name}; {tables_line()}"


def unknown_column(name: str) -> str:
    return (f"no such column: {name}; {tables_line()}, each with its key, its indexed columns "
            f"and {DOC} (see docs/registry.md, or PRAGMA table_info(machines))")
