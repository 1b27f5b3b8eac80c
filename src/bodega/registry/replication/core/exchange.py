"""Anti-entropy between two replicas: the messages, and the decisions on each side.

A pull is a ``DigestRequest`` answered by a ``DigestReply`` (the buckets
whose versions differ, ``ledger.py``), then, if any differ, a
``SyncRequest`` for those buckets answered by a ``SyncReply``
(``rowwire.py`` encodes them)::

    1. compare digests: the peer names the buckets that differ
    2. request = my Known per origin of those buckets;
       reply = rows for need(theirs, mine) + the spans vouched for
               + origins to reset + tombstone horizons

``sync_request`` and ``serve`` decide both halves from a ledger and, for
the rows themselves, anything that lists an origin's rows by version (the
view): pure functions, so the same decisions run in every daemon and in
the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from bodega.registry.membership.core.buckets import Digest
from bodega.registry.replication.core.known import EMPTY, Known, Span, need
from bodega.registry.replication.core.ledger import Ledger
from bodega.registry.replication.core.rows import Row


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


class OriginRows(Protocol):
    def by_origin(self, origin: str, lo: int, hi: int, limit: int) -> list[Row]:
        """Up to ``limit`` rows of ``origin`` with versions in [lo, hi], by version."""
        ...


def sync_request(name: str, ledger: Ledger, buckets: tuple[int, ...] | None, *,
                 past: int, counter: int) -> SyncRequest:
    """Our versions of every origin, or of the origins in ``buckets`` only.

    ``past``: versions of ours below it may be an earlier life's (0: none to
    audit); while there are, every origin is sent, with our own as unseen
    below ``past``, so peers send whatever an earlier life left.
    """
    if buckets is None or past:
        known = ledger.copy()
        buckets = None
    else:
        known = {o: ledger.get(o) for o in ledger.origins_in(buckets)}
    if past:
        known[name] = Known(counter, ((1, past),))
    return SyncRequest(name, known, buckets)


def serve(ledger: Ledger, held: OriginRows, request: SyncRequest, max_rows: int) -> SyncReply:
    """What ``request.sender`` is missing that we have, within ``max_rows``.

    An origin to reset, and the sender's own origin (it lost writes), are
    served whole whatever the budget: a partial copy would not converge.
    """
    reply = SyncReply()
    budget = max_rows
    more = False
    origins = (list(ledger.origins_in(request.buckets))
               if request.buckets is not None else sorted(o for o, _ in ledger.items()))
    for origin in origins:
        mine = ledger.get(origin)
        theirs = request.known.get(origin, EMPTY)
        purged = ledger.horizon(origin)
        if purged and theirs.top and not theirs.covers(1, purged) \
                and origin != request.sender:
            reply.reset.append(origin)
            theirs = EMPTY
        spans = need(theirs, mine)
        if not spans:
            continue
        if purged:
            reply.horizons[origin] = purged
        whole = origin in reply.reset or origin == request.sender
        vouched: list[Span] = []
        for lo, hi in spans:
            limit = 2**62 if whole else budget
            if limit <= 0:
                more = True
                break
            rows = held.by_origin(origin, lo, hi, limit + 1)
            if len(rows) > limit:
                rows = rows[:limit]
                vouched.append((lo, rows[-1].version))
                more = True
            else:
                vouched.append((lo, hi))
            reply.rows.extend(rows)
            budget -= len(rows)
        if vouched:
            reply.vouched[origin] = vouched
    return replace(reply, more=True) if more else reply
