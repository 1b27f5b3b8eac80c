"""Assignment mode: which queued tasks a registered external worker is given (pure).

The article's centralized variant: workers register what they have
(``{"cpu": 64, "mem": 256, "diskfree": "4t"}``) and poll ``/sched/assigned``;
the server filters the queued tasks to those that fit the worker's free room
(registered minus what it holds), ranks them (oldest job first: first come,
first served), and assigns. The job's home still decides each assignment in one
transaction, so two brokers assigning the same task to two workers cannot both
succeed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)b?\s*\Z", re.IGNORECASE)
_GB = {"": 1.0, "k": 1 / 1024 / 1024, "m": 1 / 1024, "g": 1.0, "t": 1024.0, "p": 1024.0 ** 2}


def gigabytes(size: str | float | int) -> float:
    """A size as the article writes it (``"4t"``, ``"512g"``, or a number of GB)."""
    if isinstance(size, int | float):
        if size < 0:
            raise ValueError(f"size {size!r} is negative")
        return float(size)
    match = _SIZE.match(size)
    if match is None:
        raise ValueError(f"size {size!r}: a number with an optional k, m, g or t suffix")
    return float(match.group(1)) * _GB[match.group(2).lower()]


@dataclass(frozen=True)
class Room:
    cpus: float
    memory_mb: float

    def minus(self, cpus: float, memory_mb: float) -> Room:
        return Room(self.cpus - cpus, self.memory_mb - memory_mb)

    def fits(self, cpus: float, memory_mb: float) -> bool:
        return cpus <= self.cpus + 1e-9 and memory_mb <= self.memory_mb + 1e-9


@dataclass(frozen=True)
class Offer:
    """A job with queued tasks, as the view shows it."""

    job_id: str
    name: str
    app: str
    queued: int
    cpus: float
    memory_mb: float
    created_at: float


def free_room(registered: Room, held: Iterable[tuple[float, float]]) -> Room:
    room = registered
    for cpus, memory_mb in held:
        room = room.minus(cpus, memory_mb)
    return room


def choose(offers: Sequence[Offer], room: Room, limit: int = 64) -> list[tuple[Offer, int]]:
    """(job, how many of its tasks) to try to assign, oldest job first, each while it fits."""
    chosen: list[tuple[Offer, int]] = []
    total = 0
    for offer in sorted(offers, key=lambda o: (o.created_at, o.job_id)):
        n = 0
        while n < offer.queued and total < limit and room.fits(offer.cpus, offer.memory_mb):
            room = room.minus(offer.cpus, offer.memory_mb)
            n += 1
            total += 1
        if n:
            chosen.append((offer, n))
        if total >= limit:
            break
    return chosen
