"""Wall-clock time that never runs backwards: what a worker stamps its records with and
measures their deadlines against.

A host's wall clock can be stepped back: NTP correcting a clock that ran fast, an operator's
``date -s``. Read raw, every deadline bodega stored would move with it. A reservation that
had lapsed, and whose room had gone to another machine, would count again (and a late create
could claim it: the same room twice); a lease that had ended would hold again; and a record
stamped after the step would look older than the one before it, which the brokers' newest-wins
merge would then pass over.

``SteadyClock`` reads the wall clock but never answers less than it answered before, nor less
than its ``floor`` (the newest time its store recorded, so a restart does not step it back
either). After a backward step it goes on at half the monotonic clock's rate until the wall
clock has caught up, as NTP slews a clock: a deadline measured meanwhile takes up to twice its
time, so it holds room longer, never less. A forward step is taken as it comes: deadlines then
pass early, which gives room back early, never twice.

It is never more than ``MOST_AHEAD`` ahead of the wall clock, though. A host that booted with
its clock years off and was then set right is followed (after a warning) rather than run at
half speed for years: a step back that large is a host's misconfiguration, not NTP's
correction, and whatever lapsed in the last minutes before it may count again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

SLEW = 0.5  # the rate at which it runs ahead of a wall clock stepped back
MOST_AHEAD = 600.0  # seconds it may run ahead of the wall clock

log = logging.getLogger("bodega.clock")


class SteadyClock:
    def __init__(self, floor: float = 0.0, *, wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._wall = wall
        self._monotonic = monotonic
        now = wall()
        self._last = max(now, self._bounded(floor, now))
        self._at = monotonic()

    def __call__(self) -> float:
        wall, at = self._wall(), self._monotonic()
        self._last = max(wall, self._bounded(self._last + SLEW * (at - self._at), wall))
        self._at = at
        return self._last

    @staticmethod
    def _bounded(value: float, wall: float) -> float:
        if value > wall + MOST_AHEAD:
            log.warning("the wall clock is %.0f s behind the time already recorded; "
                        "following it from %.0f s ahead", value - wall, MOST_AHEAD)
            return wall + MOST_AHEAD
        return value
