"""Placements that found no room, kept for a while and grouped by why.

The placer reports every placement that ends in ``insufficient_capacity``
(``Placer.refused``) with its record: per region, how many workers each
filter refused and the first twenty by name with their reason, and each
worker asked that said no or did not answer. ``RecentRefusals`` keeps the
newest ``KEPT`` in memory (a broker holds nothing durable: a restart
forgets them, as it forgets its metrics). ``group_by_reason`` turns them into
the placements screen: one group per reason, how many placements it turned
away, and the workers involved.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bodega.broker.placing.core.record import Record
from bodega.broker.ui.core.rows import natural

KEPT = 200

# Reasons as the filters name them (``placement.rank``), then what workers said when asked.
LABELS = {
    "not_alive": "worker not alive (suspect, dead or left)",
    "cordoned": "worker cordoned",
    "pinned": "pinned to another worker (its volume)",
    "avoided": "avoided (a same-named volume is there)",
    "no_image_driver": "runs no images (process driver only)",
    "isolation": "isolation not offered",
    "cpu_kind": "cpu kind not offered",
    "cpu": "not enough cpu",
    "memory": "not enough memory",
    "disk": "not enough disk",
    "gpus": "not enough gpus",
    "said_no": "said no when asked (its own figures)",
    "unreachable": "did not answer when asked",
}


@dataclass(frozen=True)
class WorkerRefusal:
    worker: str
    region: str
    kind: str
    reason: str


@dataclass(frozen=True)
class Refusal:
    at: float  # epoch seconds
    app: str
    asked: str  # "1 shared cpu, 256 MB"
    regions: tuple[str, ...]
    message: str  # what the client was told
    kinds: tuple[tuple[str, int], ...]  # workers turned away per reason, all counted
    workers: tuple[WorkerRefusal, ...]  # those named: the first twenty per region, and asks


def kind_of(reason: str, counted: Iterable[str] = ()) -> str:
    """The filter a worker's refusal reason comes from (its first shortfall wins, as the
    filters count it); a reason no filter words (a volume's pin or avoidance) is the one
    of those two the placement counted."""
    if reason.startswith("worker is "):
        return "not_alive"
    if reason in ("cordoned", "draining"):
        return "cordoned"
    if reason.startswith("runs no images"):
        return "no_image_driver"
    for prefix, kind in (("isolation ", "isolation"), ("cpu kind ", "cpu_kind"), ("cpu:", "cpu"),
                         ("memory:", "memory"), ("gpu:", "gpus"), ("disk:", "disk")):
        if reason.startswith(prefix):
            return kind
    counted = set(counted)
    return "avoided" if "avoided" in counted and "pinned" not in counted else "pinned"


def refusal_of(app: str, record: Record, message: str, at: float | None = None) -> Refusal:
    kinds: dict[str, int] = {}
    named: list[WorkerRefusal] = []
    for ranking in record.regions:
        for kind, count in ranking.refused_by_kind.items():
            kinds[kind] = kinds.get(kind, 0) + count
        for worker, reason in ranking.refusals:
            named.append(WorkerRefusal(worker, ranking.region,
                                       kind_of(reason, ranking.refused_by_kind), reason))
    for attempt in record.attempts:
        if attempt.outcome == "accepted":
            continue
        kind = "unreachable" if attempt.outcome == "unreachable" else "said_no"
        kinds[kind] = kinds.get(kind, 0) + 1
        named.append(WorkerRefusal(attempt.worker, attempt.region, kind, attempt.reason))
    asked = record.asked.describe()
    return Refusal(at=record.started if at is None else at, app=app, asked=asked,
                   regions=tuple(record.regions_asked), message=message,
                   kinds=tuple(sorted(kinds.items())), workers=tuple(named))


class RecentRefusals:
    """The newest refusals, newest first, and who to tell when one arrives."""

    def __init__(self, kept: int = KEPT) -> None:
        self._items: deque[Refusal] = deque(maxlen=kept)
        self._listeners: list[Callable[[], None]] = []

    def note(self, app: str, record: Record, message: str) -> None:
        """What ``Placer.refused`` calls."""
        self.add(refusal_of(app, record, message, time.time()))

    def add(self, refusal: Refusal) -> None:
        self._items.appendleft(refusal)
        for listener in list(self._listeners):
            listener()

    def items(self) -> list[Refusal]:
        return list(self._items)

    def listen(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after each new refusal; returns the remover."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove


@dataclass(frozen=True)
class WorkerTally:
    worker: str
    region: str
    times: int  # placements in which it was turned away for this reason
    last_reason: str


@dataclass(frozen=True)
class ReasonGroup:
    kind: str
    label: str
    placements: int  # placements this reason turned a worker away in
    refused: int  # workers turned away for it, summed over those placements
    workers: tuple[WorkerTally, ...]  # by name, most often first
    latest: Refusal


def group_by_reason(refusals: Iterable[Refusal]) -> list[ReasonGroup]:
    """One group per reason, the reason that turned away most placements first.

    ``refusals`` come newest first, so a group's ``latest`` and each worker's
    ``last_reason`` are the newest seen.
    """
    placements: dict[str, int] = {}
    refused: dict[str, int] = {}
    latest: dict[str, Refusal] = {}
    tallies: dict[str, dict[str, WorkerTally]] = {}
    for item in refusals:
        for kind, count in item.kinds:
            placements[kind] = placements.get(kind, 0) + 1
            refused[kind] = refused.get(kind, 0) + count
            latest.setdefault(kind, item)
        seen: set[tuple[str, str]] = set()
        for w in item.workers:
            if (w.kind, w.worker) in seen:
                continue
            seen.add((w.kind, w.worker))
            by_worker = tallies.setdefault(w.kind, {})
            old = by_worker.get(w.worker)
            by_worker[w.worker] = WorkerTally(
                w.worker, w.region, 1 + (old.times if old else 0),
                old.last_reason if old else w.reason)
    groups = [ReasonGroup(kind, LABELS.get(kind, kind.replace("_", " ")), placements[kind],
                          refused[kind],
                          tuple(sorted(tallies.get(kind, {}).values(),
                                       key=lambda t: (-t.times, natural(t.worker)))),
                          latest[kind])
              for kind in placements]
    return sorted(groups, key=lambda g: (-g.placements, -g.refused, g.kind))
