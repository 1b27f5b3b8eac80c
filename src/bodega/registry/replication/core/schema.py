"""The replicated tables: who may write them, their indexed columns, and the SQL.

Two kinds of table:

- **owned** (workers, machines, volumes, images): one node, the owner, is the
  only writer of a row; its versions only rise, so the newest version wins
  and there is never a conflict to resolve. Which node owns a row is read
  from the row itself (``ownership``), so a row claiming to belong to one
  node but sent with another's name is refused.
- **shared** (apps, tokens, releases, ip_assignments, keyrings, join tokens and joins):
  any node writes; the write with the greatest hybrid-clock stamp wins (``hlc.py``).

Every table stores the document as JSON plus a few columns extracted from it,
the ones reads filter on (``rows("machines", app=..., state=...)``); the
replication bookkeeping columns start with an underscore so they can never
clash with a document's (releases have a ``version`` of their own). The
schema only ever grows: migrations add tables, columns (with defaults) and
indexes, never drop or rename, because a peer on an older version must keep
applying what newer peers send (Corrosion #167, #261). A test checks that the
migrated schema has every column declared here, so a new column cannot be
added to a spec without its migration.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bodega.model.json import JsonObject

# Rows whose indexed columns equal these values (checked: ``subscriptions.normalize_filters``).
Filters = dict[str, str | int]


class Kind(StrEnum):
    OWNED = "owned"
    SHARED = "shared"


@dataclass(frozen=True)
class Column:
    name: str
    type: type  # str, int or bool (stored as 0/1)
    required: bool = True  # an optional column may be missing or null in the doc


@dataclass(frozen=True)
class TableSpec:
    name: str
    kind: Kind
    key: str  # the column holding the row key (also a doc field, when the doc has it)
    columns: tuple[Column, ...]
    # The doc field naming the owner ("worker"), "key" when the key is the owner's
    # name, or "key-prefix" when keys are "<owner>/<...>"; None for shared tables.
    ownership: str | None = None

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def indexed(self, key: str, doc: JsonObject) -> dict[str, object]:
        """The indexed column values of a (validated) row, as SQLite stores them."""
        values: dict[str, object] = {self.key: key}
        for column in self.columns:
            value = doc.get(column.name)
            values[column.name] = int(value) if isinstance(value, bool) else value
        return values

    def owner_of(self, key: str, doc: JsonObject | None) -> str | None:
        """The node that owns this row by its content; None when the content cannot tell."""
        if self.ownership is None:
            return None
        if self.ownership == "key":
            return key
        if self.ownership == "key-prefix":
            owner, sep, _ = key.partition("/")
            return owner if sep else None
        if doc is None:
            return None
        value = doc.get(self.ownership)
        return value if isinstance(value, str) else None


def _spec(name: str, kind: Kind, key: str, ownership: str | None, *cols: Column) -> TableSpec:
    return TableSpec(name, kind, key, cols, ownership)


TABLES: dict[str, TableSpec] = {spec.name: spec for spec in (
    _spec("workers", Kind.OWNED, "name", "key",
          Column("region", str), Column("url", str), Column("cordoned", bool)),
    _spec("machines", Kind.OWNED, "id", "worker",
          Column("app", str), Column("name", str), Column("region", str), Column("worker", str),
          Column("state", str)),
    _spec("volumes", Kind.OWNED, "id", "worker",
          Column("app", str), Column("name", str), Column("region", str), Column("worker", str),
          Column("state", str), Column("attached_machine_id", str, required=False)),
    _spec("images", Kind.OWNED, "key", "key-prefix",
          Column("worker", str), Column("ref", str)),
    _spec("apps", Kind.SHARED, "name", None, Column("org_slug", str)),
    _spec("tokens", Kind.SHARED, "id", None, Column("token_hash", str), Column("scope", str)),
    _spec("releases", Kind.SHARED, "id", None, Column("app", str), Column("version", int)),
    # Keyed "<app>/<name>"; the document holds the value sealed (runtime/secretbox.py).
    _spec("secrets", Kind.SHARED, "key", None, Column("app", str)),
    # Keyed "<app>/<ip>": a shared address appears once per app that holds it.
    _spec("ip_assignments", Kind.SHARED, "key", None, Column("app", str), Column("ip", str)),
    # Keyed "<app>/<name>"; the document holds the key's material sealed (broker/secrets/keys.py).
    _spec("secretkeys", Kind.SHARED, "key", None, Column("app", str)),
    # Batch jobs, each written by its home (the worker that committed it and decides its
    # claims); external workers of assignment mode, registered through a broker.
    _spec("jobs", Kind.OWNED, "id", "home",
          Column("app", str), Column("name", str), Column("pool", str), Column("state", str),
          Column("home", str)),
    _spec("sched_workers", Kind.SHARED, "worker", None, Column("pool", str)),
    # One row, "gossip": the cluster's gossip keyring as a rotation last wrote it (keys in
    # the clear: the view lives in each node's private data dir; see docs/security.md).
    _spec("keyrings", Kind.SHARED, "name", None, Column("serial", int)),
    # Keyed "<app>/<hostname>": the chain in clear, the key sealed (runtime/secretbox.py).
    _spec("certificates", Kind.SHARED, "key", None, Column("app", str)),
    # The join book, written by the servers (brokers holding the CA's key): a token's row
    # at its create and at its revoke only, and a row of its own per join, keyed
    # "<token id>/<the host's first worker>", with the subnets it handed out
    # (broker/trust/join_book.py), so last-writer-wins loses no revocation and no join.
    _spec("join_tokens", Kind.SHARED, "id", None, Column("server", bool)),
    _spec("join_uses", Kind.SHARED, "key", None, Column("token", str)),
    # The autoscaler: an app's setting (any broker writes it) and its evaluator's lease and
    # last decision (the broker holding the lease writes it), both keyed by the app's name.
    _spec("autoscale", Kind.SHARED, "app", None, Column("min", int)),
    _spec("autoscale_runs", Kind.SHARED, "app", None, Column("holder", str)),
)}


def _table_ddl(table: str, key: str, columns: str) -> str:
    """One replicated table; ``columns`` are "name TYPE" pairs, each indexed."""
    names = [c.split()[0] for c in columns.split(",")]
    indexes = "\n".join(f"CREATE INDEX {table}_by_{n} ON {table} ({n});" for n in names)
    return f"""
CREATE TABLE {table} (
    {key} TEXT PRIMARY KEY,
    _doc TEXT,                     -- the document as JSON; NULL for a tombstone
    _owner TEXT NOT NULL,          -- owned tables: the owner; shared: the last writer
    _version INTEGER NOT NULL,     -- the owner's (or writer's) counter at this write
    _hlc_wall INTEGER NOT NULL,    -- hybrid clock stamp of the write (shared: the order)
    _hlc_logical INTEGER NOT NULL,
    _deleted INTEGER NOT NULL DEFAULT 0,
    _updated_at REAL NOT NULL,     -- when this node applied it (tombstones age from here)
    {columns}
);
CREATE INDEX {table}_by_origin ON {table} (_owner, _version);
CREATE INDEX {table}_tombstones ON {table} (_updated_at) WHERE _deleted = 1;
{indexes}
"""


# Numbered migrations, applied in order; the number is SQLite's user_version.
# Append only, and only additive statements (CREATE, ALTER TABLE ... ADD COLUMN):
# the column lists are written out here, not derived from TABLES, so changing a
# spec without a migration fails the schema test instead of passing silently.
MIGRATIONS: tuple[str, ...] = (
    # 1: every table, plus per-origin bookkeeping and the node's own clock.
    _table_ddl("workers", "name", "region TEXT, url TEXT, cordoned INTEGER")
    + _table_ddl("machines", "id",
                 "app TEXT, name TEXT, region TEXT, worker TEXT, state TEXT")
    + _table_ddl("volumes", "id", "app TEXT, name TEXT, region TEXT, worker TEXT, state TEXT, "
                 "attached_machine_id TEXT")
    + _table_ddl("images", "key", "worker TEXT, ref TEXT")
    + _table_ddl("apps", "name", "org_slug TEXT")
    + _table_ddl("tokens", "id", "token_hash TEXT, scope TEXT")
    + _table_ddl("releases", "id", "app TEXT, version INTEGER")
    + """
CREATE TABLE origins (
    origin TEXT PRIMARY KEY,
    top INTEGER NOT NULL,          -- highest version of this origin known to exist
    gaps TEXT NOT NULL,            -- JSON [[lo, hi], ...]: versions below top not seen
    purged INTEGER NOT NULL DEFAULT 0  -- highest version of a tombstone purged here
);
CREATE TABLE clock (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    wall INTEGER NOT NULL,
    logical INTEGER NOT NULL
);
""",
    # 2: app IP assignments (shared rows written by brokers, like apps).
    _table_ddl("ip_assignments", "key", "app TEXT, ip TEXT"),
    # 3: app secrets (shared rows written by brokers; values sealed, never plain).
    _table_ddl("secrets", "key", "app TEXT"),
    # 4: app secret keys (shared rows written by brokers; material sealed, never plain).
    _table_ddl("secretkeys", "key", "app TEXT"),
    # 5: batch jobs (owned by their home worker) and assignment mode's registered workers.
    _table_ddl("jobs", "id", "app TEXT, name TEXT, pool TEXT, state TEXT, home TEXT")
    + _table_ddl("sched_workers", "worker", "pool TEXT"),
    # 6: the gossip keyring a key rotation spreads (registry/keyrotation.py).
    _table_ddl("keyrings", "name", "serial INTEGER"),
    # 7: the edge's certificates (shared rows written by brokers; keys sealed, never plain).
    _table_ddl("certificates", "key", "app TEXT"),
    # 8: the order rows were applied here in, for the host's readers of an agent's view
    # (registry/agent/hosted.py follows it instead of being told of each change).
    "".join(f"ALTER TABLE {t} ADD COLUMN _seq INTEGER NOT NULL DEFAULT 0;\n"
            f"CREATE INDEX {t}_by_seq ON {t} (_seq);\n"
            for t in ("workers", "machines", "volumes", "images", "apps", "tokens", "releases",
                      "ip_assignments", "secrets", "secretkeys", "jobs", "sched_workers",
                      "keyrings", "certificates")),
    # 9: the join book (join tokens by the hash of their secret, and the joins each let in).
    _table_ddl("join_tokens", "id", "server INTEGER")
    + _table_ddl("join_uses", "key", "token TEXT")
    + "".join(f"ALTER TABLE {t} ADD COLUMN _seq INTEGER NOT NULL DEFAULT 0;\n"
              f"CREATE INDEX {t}_by_seq ON {t} (_seq);\n"
              for t in ("join_tokens", "join_uses")),
    # 10: the autoscaler's settings and runs (broker/autoscale/).
    _table_ddl("autoscale", "app", "min INTEGER")
    + _table_ddl("autoscale_runs", "app", "holder TEXT")
    + "".join(f"ALTER TABLE {t} ADD COLUMN _seq INTEGER NOT NULL DEFAULT 0;\n"
              f"CREATE INDEX {t}_by_seq ON {t} (_seq);\n"
              for t in ("autoscale", "autoscale_runs")),
)
