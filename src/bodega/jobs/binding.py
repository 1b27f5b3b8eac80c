"""Late binding (Sparrow) for bodega's own workers: where reservations go, how many are out.

A submit of m tasks places ``ratio``·m reservations ("probes") on workers taken
in the broker's ranking order; with more probes than workers, the ranking is
walked again, so a worker may hold several of one job's. A worker with room
asks the job's home for a task when a probe reaches the head of its queue; the
home gives a task to each of the first m askers (``jobs.pick``) and answers
"none" to the rest, which drop their probe: a task is bound to a worker only
when that worker can start it, never queued behind a slow one.

When a task comes back to the queue (a failed attempt, a lapsed lease) or
probes are lost with their worker, the home tops its probes up
(``wanted``) on workers it ranks from its own view (``by_room``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_RATIO = 2.0  # d: probes per task, as in Sparrow


def spread(ranked: Sequence[str], total: int) -> dict[str, int]:
    """``total`` probes over ``ranked`` workers, best first, walking the ranking again and
    again while probes are left."""
    placed: dict[str, int] = {}
    if not ranked:
        return placed
    for i in range(total):
        worker = ranked[i % len(ranked)]
        placed[worker] = placed.get(worker, 0) + 1
    return placed


def probes_for(tasks: int, ratio: float) -> int:
    return max(tasks, math.ceil(tasks * ratio)) if tasks > 0 else 0


def probe_order(ranked: Sequence[str], live: Iterable[tuple[str, bool]]) -> list[str]:
    """Where a job's probes go, best first: the workers ``ranked`` with room for a task now,
    then the other ``live`` ones (name, whether the task fits it when empty) that could hold
    one once their room comes back: a probe waits in its worker's queue, and room held for a
    second (idle warm slots of another job, machines being destroyed) must not leave every
    probe on the one worker that had room at the submit. When no worker could ever hold a
    task, every live one: room may be added, and the home tops probes up."""
    order = list(ranked)
    listed = [(name, could) for name, could in live if name not in order]
    later = [name for name, could in listed if could]
    return order + (later if later or order else [name for name, _ in listed])


def wanted(claimable: int, outstanding: int, ratio: float) -> int:
    """Probes to add so that ``claimable`` tasks have ``ratio`` probes each out on live
    workers, counting the ``outstanding`` ones still there."""
    return max(0, probes_for(claimable, ratio) - outstanding)


def interleave(rankings: Iterable[Sequence[str]]) -> list[str]:
    """Several regions' rankings as one: the best of each, then the second of each..."""
    lists = [list(r) for r in rankings]
    out: list[str] = []
    seen: set[str] = set()
    for i in range(max((len(r) for r in lists), default=0)):
        for ranking in lists:
            if i < len(ranking) and ranking[i] not in seen:
                seen.add(ranking[i])
                out.append(ranking[i])
    return out


@dataclass(frozen=True)
class WorkerRoom:
    """A worker as the home sees it in its view: alive or not, and its free room."""

    name: str
    alive: bool
    cordoned: bool
    free_millicpus: int
    free_memory_mb: int
    region: str = ""


def by_room(workers: Iterable[WorkerRoom], millicpus: int, memory_mb: int,
            rng: random.Random, regions: Sequence[str] = ()) -> list[str]:
    """Live, uncordoned workers (of ``regions``, if any), those with room for one task first,
    most free first (ties in random order); the others after them: room comes back."""
    live = [w for w in workers if w.alive and not w.cordoned
            and (not regions or w.region in regions)]
    keyed = [(w.free_millicpus >= millicpus and w.free_memory_mb >= memory_mb,
              w.free_millicpus, rng.random(), w.name) for w in live]
    keyed.sort(reverse=True)
    return [name for *_, name in keyed]
