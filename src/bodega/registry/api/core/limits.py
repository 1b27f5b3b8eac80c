"""How much one query may take, and what a query cut at a bound is told.

A query runs on the agent that holds the host's replica: the same process
gossips and replicates. Every bound is there so that one query, however it is
written, costs that process a bounded time and memory: a time limit (SQLite is
interrupted), a row limit and a size limit (the rows' JSON). A query cut at a
bound ends with an error line naming the bound and how to ask for less.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MIB = 1024 * 1024


@dataclass(frozen=True)
class QueryLimits:
    time: float = 5.0  # seconds of SQLite work per query (a subscription's every re-run too)
    rows: int = 10_000  # rows per answer (a subscription's result, whole)
    bytes: int = 8 * MIB  # the rows' JSON per answer
    concurrent: int = 4  # queries run at once; more wait their turn
    kept_changes: int = 10_000  # changes kept per subscription, to resume from
    subscriptions: int = 1_000  # subscriptions kept at once
    idle: float = 3600.0  # seconds a subscription nobody follows is kept, to resume
    settle: float = 0.05  # seconds changes gather before the subscriptions they touch re-run

    def __post_init__(self) -> None:
        for name in ("time", "rows", "bytes", "concurrent", "kept_changes", "subscriptions"):
            if getattr(self, name) <= 0:
                raise ValueError(f"query limit {name} must be above 0")
        if self.idle < 0 or self.settle < 0:
            raise ValueError("query limits idle and settle cannot be negative")


class Bound(StrEnum):
    TIME = "time"
    ROWS = "rows"
    BYTES = "bytes"


def cut(bound: Bound, limits: QueryLimits) -> str:
    """What a query cut at ``bound`` is told: which bound, and how to narrow the query."""
    narrow = ("narrow it with a WHERE on an indexed column (each table's key and columns "
              "besides doc) or a LIMIT")
    if bound is Bound.TIME:
        return (f"query cut at the time limit ({limits.time:g} s of work): {narrow}, "
                "or join and sort less")
    if bound is Bound.ROWS:
        return (f"query cut at the row limit ({limits.rows} rows): {narrow}, or page through "
                "it (ORDER BY the key, WHERE key > the last one seen, LIMIT n)")
    size = f"{limits.bytes / MIB:g} MiB" if limits.bytes >= MIB else f"{limits.bytes} bytes"
    return (f"query cut at the size limit ({size} of rows): select fewer columns (doc, the "
            f"whole document, is the largest; json_extract(doc, '$.field') takes a part), "
            f"or {narrow}")
