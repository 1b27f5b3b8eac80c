"""The anti-entropy messages a replica answers, as typed values (``rowwire.py`` encodes them).

A pull is a ``DigestRequest`` answered by a ``DigestReply`` (the buckets
whose versions differ, ``ledger.py``), then, if any differ, a
``SyncRequest`` for those buckets answered by a ``SyncReply``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bodega.registry.buckets import Digest
from bodega.registry.replication.known import Known, Span
from bodega.registry.replication.rows import Row


@dataclass(frozen=True)
class SyncRequest:
    sender: str
    known: dict[str, Known]
    buckets: tuple[int, ...] | None = None  # serve only origins in these; None: every origin


@dataclass(frozen=True)
class DigestRequest:
    sender: str
    digest: Digest


@dataclass(frozen=True)
class DigestReply:
    differ: tuple[int, ...]  # the buckets to exchange versions for


@dataclass(frozen=True)
class SyncReply:
    rows: list[Row] = field(default_factory=list)
    vouched: dict[str, list[Span]] = field(default_factory=dict)
    reset: list[str] = field(default_factory=list)
    horizons: dict[str, int] = field(default_factory=dict)  # origin -> highest purged version
    more: bool = False  # the row budget ran out: the requester should pull again soon
