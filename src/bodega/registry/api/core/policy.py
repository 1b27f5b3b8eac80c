"""What a user's SQL may do on a query connection: read the public views, nothing else.

SQLite asks an authorizer about every table, column, function and statement
kind while it prepares a statement (``sqlite3_set_authorizer``); this is that
authorizer's judgement, with no SQLite in it. It lets through:

- SELECT, recursive common table expressions, and every function but those that
  reach outside the database (``load_extension``, the shell's file functions);
- reads of the public views (``catalog.py``) from anywhere; reads of a
  ``live_<nonce>_`` view only from its public view; reads of a raw replicated
  table only from its ``live_<nonce>_`` view (how the views themselves read it);
- the table-valued ``json_each`` and ``json_tree``, and ``PRAGMA table_info`` of
  a public view (SQLite's own look at its schema when it first opens one of those
  is let through too: the connection is read-only and ``query_only`` besides).

Everything else is refused, and the first refusal is kept so that the statement's
error says what was refused (SQLite's own says only "not authorized"). The raw
tables read through the views are kept too: they are the tables a subscription's
result depends on.

The action codes are SQLite's (``sqlite3.h``), fixed since 3.0; a unit test holds
them to the ``sqlite3`` module's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from bodega.registry.api.core.catalog import PUBLIC, live_view, tables_line


class Action(IntEnum):
    CREATE_INDEX = 1
    CREATE_TABLE = 2
    CREATE_TEMP_INDEX = 3
    CREATE_TEMP_TABLE = 4
    CREATE_TEMP_TRIGGER = 5
    CREATE_TEMP_VIEW = 6
    CREATE_TRIGGER = 7
    CREATE_VIEW = 8
    DELETE = 9
    DROP_INDEX = 10
    DROP_TABLE = 11
    DROP_TEMP_INDEX = 12
    DROP_TEMP_TABLE = 13
    DROP_TEMP_TRIGGER = 14
    DROP_TEMP_VIEW = 15
    DROP_TRIGGER = 16
    DROP_VIEW = 17
    INSERT = 18
    PRAGMA = 19
    READ = 20
    SELECT = 21
    TRANSACTION = 22
    UPDATE = 23
    ATTACH = 24
    DETACH = 25
    ALTER_TABLE = 26
    REINDEX = 27
    ANALYZE = 28
    CREATE_VTABLE = 29
    DROP_VTABLE = 30
    FUNCTION = 31
    SAVEPOINT = 32
    RECURSIVE = 33


class Verdict(IntEnum):
    OK = 0
    DENY = 1


# Functions that reach outside the database: none is built into the sqlite3 module, but a
# build of SQLite may carry them.
OUTSIDE = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer",
                     "sqlar_compress", "sqlar_uncompress", "lsmode", "shell_add_schema"})
TABLE_FUNCTIONS = frozenset({"json_each", "json_tree"})
PRAGMA_READS = frozenset({"table_info", "table_xinfo"})
PRAGMA_FUNCTIONS = frozenset(f"pragma_{name}" for name in PRAGMA_READS)
SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema"})


@dataclass(frozen=True)
class Refusal:
    kind: Literal["read-only", "table"]
    what: str  # "INSERT into machines", "tokens"

    @property
    def message(self) -> str:
        if self.kind == "table":
            return f"no such table: {self.what}; {tables_line()}"
        return (f"the registry is read-only through this API: {self.what} is refused "
                "(a query is one SELECT on the public tables)")


def _refused(action: int, first: str | None) -> str:
    """What a refused action is, as a user wrote it."""
    if action == Action.TRANSACTION:
        return first or "a transaction"  # BEGIN, COMMIT, ROLLBACK
    if action == Action.SAVEPOINT:
        return "SAVEPOINT"
    if action == Action.ATTACH:
        return "ATTACH" if first else "VACUUM"
    if first is not None and first.startswith(("sqlite_master", "sqlite_schema",
                                               "sqlite_temp_master", "sqlite_temp_schema")):
        return "a change to the schema"
    try:
        words = Action(action).name.split("_")
    except ValueError:
        return f"statement kind {action}"
    word = " ".join(words) if words[0] in ("CREATE", "DROP", "ALTER") else words[0]
    return f"{word} on {first}" if first else word


class ReadPolicy:
    """One statement's authorizer: ``decide`` is handed to ``set_authorizer``."""

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce
        self.tables: set[str] = set()  # raw replicated tables read through the views
        self.refusal: Refusal | None = None
        self._inner = {live_view(name, nonce): name for name in PUBLIC}

    def decide(self, action: int, first: str | None, second: str | None, database: str | None,
               source: str | None) -> int:
        refusal = self._judge(action, first, second, database, source)
        if refusal is None:
            return Verdict.OK
        if self.refusal is None:
            self.refusal = refusal
        return Verdict.DENY

    def _judge(self, action: int, first: str | None, second: str | None,
               database: str | None, source: str | None) -> Refusal | None:
        if action in (Action.SELECT, Action.RECURSIVE):
            return None
        if action == Action.READ:
            return self._read(first or "", second or "", database, source)
        if action == Action.FUNCTION:
            name = (second or "").lower()
            return Refusal("read-only", f"{name}()") if name in OUTSIDE else None
        if action == Action.PRAGMA:
            name = (first or "").lower()
            if name in PRAGMA_READS and second in PUBLIC:
                return None
            return Refusal("read-only", f"PRAGMA {name}")
        if action == Action.UPDATE and first in SCHEMA_TABLES and database == "main" \
                and source is None:
            return None  # SQLite's own look at its schema as it opens a table-valued function
        return Refusal("read-only", _refused(action, first))

    def _read(self, table: str, column: str, database: str | None,
              source: str | None) -> Refusal | None:
        if database is None:
            return None  # a common table expression's or a subquery's: nothing stored
        if database == "temp" and table in PUBLIC:
            return None
        if database == "temp" and source is not None and self._inner.get(table) == source:
            return None
        if database == "main" and source is not None and self._inner.get(source) == table:
            self.tables.add(table)
            return None
        if database == "main" and source is None and (
                table in TABLE_FUNCTIONS or table in PRAGMA_FUNCTIONS
                or (table in SCHEMA_TABLES and column == "ROWID")):
            return None  # the functions' own columns; SQLite's look at its schema (above)
        return Refusal("table", f"main.{table}" if table in PUBLIC else table)
