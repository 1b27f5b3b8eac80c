"""Simulated time for the simulators: a clock, and the queue of what happens when.

The clock moves only when the queue runs its next event; events at the same
instant run in the order they were scheduled, so a seeded simulation replays
exactly. ``simnet.py`` schedules packets and ticks on it, ``replsim.py`` the
sync exchanges of replication.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable


class SimClock:
    """Simulated time: it moves only when the network runs its next event."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class Schedule:
    """Actions by simulated time, ties in the order they were scheduled."""

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0

    def at(self, when: float, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, action))

    def run_until(self, until: float) -> None:
        """Run every action due by ``until``, moving the clock to each, then to ``until``."""
        heap = self._heap
        while heap and heap[0][0] <= until:
            when, _, action = heapq.heappop(heap)
            self.clock.now = when
            action()
        self.clock.now = until
