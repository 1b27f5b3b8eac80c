"""A hybrid logical clock: the order of writes to shared rows (apps, tokens, releases).

Shared rows are last-writer-wins, and "last" has to mean the same thing on
every node without a central clock. A stamp is (wall milliseconds, logical
counter, node name): the wall part keeps stamps close to real time so a
human reading them is not misled, the counter orders writes within one
millisecond or after the local clock stepped back, and the node name breaks
the last ties, so two stamps are never equal unless they are the same write
(Kulkarni et al., "Logical Physical Clocks", 2014).

Every stamp a node observes pulls its clock forward, so a write made after
reading a row always wins over that row, even if the writer's wall clock is
behind. A stamp too far in the future (a peer with a broken clock) is
refused instead of dragging everyone's clock along with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_MAX_DRIFT_MS = 5 * 60 * 1000


class ClockDrift(ValueError):
    """A remote stamp further ahead of our wall clock than the allowed drift."""


@dataclass(frozen=True, order=True)
class Stamp:
    wall_ms: int
    logical: int
    node: str


class HybridClock:
    def __init__(self, node: str, now_ms: Callable[[], int], *, wall_ms: int = 0,
                 logical: int = 0, max_drift_ms: int = DEFAULT_MAX_DRIFT_MS) -> None:
        self.node = node
        self._now_ms = now_ms
        self._wall = wall_ms  # the last stamp issued or observed, restored after a restart
        self._logical = logical
        self.max_drift_ms = max_drift_ms

    @property
    def last(self) -> tuple[int, int]:
        return self._wall, self._logical

    def tick(self) -> Stamp:
        """A stamp for a local write, greater than every stamp issued or observed before."""
        now = self._now_ms()
        if now > self._wall:
            self._wall, self._logical = now, 0
        else:
            self._logical += 1
        return Stamp(self._wall, self._logical, self.node)

    def check(self, stamp: Stamp) -> None:
        """Raise ``ClockDrift`` if ``stamp`` is too far ahead to be trusted."""
        if stamp.wall_ms > self._now_ms() + self.max_drift_ms:
            raise ClockDrift(f"stamp {stamp.wall_ms} ms from {stamp.node} is more than "
                             f"{self.max_drift_ms} ms ahead of this node's clock")

    def observe(self, stamp: Stamp) -> None:
        """Move past a remote stamp (``check`` it first), so our next write orders after it."""
        if (stamp.wall_ms, stamp.logical) > (self._wall, self._logical):
            self._wall, self._logical = stamp.wall_ms, stamp.logical
