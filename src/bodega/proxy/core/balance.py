"""Choosing a machine for a request, one to wake, and one to put to sleep. Pure functions.

Load balancing follows fly-proxy. The machines that can serve are in two
tiers (``tiers``): the *near* one, the proxy's own region's (or every region's
when none there can serve), and the *far* one, the rest, taken only while every
near machine is at its hard limit: the nearest machine with room wins. Within
a tier each machine is in one of three bands by its outstanding requests:
under ``soft_limit`` (preferred), between soft and ``hard_limit`` (used only
when every machine of the tier is over its soft limit), at the hard limit
(never). Among the best band, the least loaded wins, ties broken at random.
HAProxy holds the same tiers as two backends per app (``haproxy/core/layout.py``).

Waking: when no machine can take the request, or every one is over its soft
limit, one stopped machine with ``autostart`` in the nearest region is
started. Sleeping: per region, with several machines running, ``excess =
running - (machines over soft limit + 1)``; if that is at least one, one
idle machine is stopped; a lone machine is stopped only at zero load; never
below ``min_machines_running`` in the app's primary region.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from bodega.proxy.core.routes import PASSING, ROUTABLE_STATES, WAKEABLE_STATES, Backend

UNDER, OVER_SOFT, AT_HARD = 0, 1, 2


@dataclass(frozen=True)
class Choice:
    backend: Backend | None
    over_soft: bool = False  # every usable machine is past its soft limit: wake another
    reason: str = ""


def band(backend: Backend, outstanding: int) -> int:
    if backend.hard_limit is not None and outstanding >= backend.hard_limit:
        return AT_HARD
    return OVER_SOFT if outstanding >= backend.soft_limit else UNDER


def usable(backend: Backend, alive: Callable[[str], bool]) -> bool:
    """Routable: started, not cordoned, its service checks passing, its worker alive."""
    return (backend.state in ROUTABLE_STATES and not backend.cordoned
            and backend.checks == PASSING and alive(backend.worker))


@dataclass(frozen=True)
class Tiers:
    near: list[Backend]  # the proxy's region's, or every region's when it has none
    far: list[Backend]  # the rest: only while every near machine is at its hard limit


def tiers(backends: Iterable[Backend], region: str, alive: Callable[[str], bool],
          exclude: frozenset[str] = frozenset()) -> Tiers:
    """The machines that can serve, nearest first.

    Regions have no distance here but "this one" and "another", so the near tier is the
    proxy's own region's machines, and every machine when none there can serve (down,
    stopped, cordoned, its worker not alive): the next nearest region is then all the
    others. A near machine with room always wins over a far one (``choose``).
    """
    candidates = [b for b in backends if usable(b, alive) and b.machine_id not in exclude]
    local = [b for b in candidates if b.region == region]
    if not local:
        return Tiers(candidates, [])
    return Tiers(local, [b for b in candidates if b.region != region])


def choose(backends: Iterable[Backend], load: Mapping[str, int], region: str,
           alive: Callable[[str], bool], rng: random.Random,
           exclude: frozenset[str] = frozenset()) -> Choice:
    tiered = tiers(backends, region, alive, exclude)
    if not tiered.near:
        return Choice(None, reason="no started machine can serve")
    for group in (tiered.near, tiered.far):
        banded = [(band(b, load.get(b.machine_id, 0)), b) for b in group]
        open_ = [(n, b) for n, b in banded if n != AT_HARD]
        if not open_:
            continue
        best_band = min(n for n, _ in open_)
        pool = [b for n, b in open_ if n == best_band]
        least = min(load.get(b.machine_id, 0) for b in pool)
        ties = [b for b in pool if load.get(b.machine_id, 0) == least]
        return Choice(rng.choice(ties), over_soft=best_band == OVER_SOFT)
    return Choice(None, over_soft=True, reason="every machine is at its hard limit")


def wake_candidate(backends: Iterable[Backend], region: str,
                   alive: Callable[[str], bool]) -> Backend | None:
    """The sleeping machine to start: nearest region first, a suspended one (a resume is
    faster than a start) before a stopped one, then the oldest."""
    sleeping = [b for b in backends if b.state in WAKEABLE_STATES and b.autostart
                and not b.cordoned and alive(b.worker)]
    if not sleeping:
        return None
    return min(sleeping, key=lambda b: (b.region != region, b.state != "suspended",
                                        b.created_at, b.machine_id))


def autostop_victim(backends: Iterable[Backend], load: Mapping[str, int],
                    idle_since: Mapping[str, float], now: float, idle_for: float,
                    keep: int) -> Backend | None:
    """One machine of one app in one region to stop, or None.

    ``keep`` is how many must stay running here (``min_machines_running`` in
    the primary region, else 0); ``idle_since`` is when each machine last had
    no outstanding request (absent: busy). The only machine that can serve is never
    the one stopped while others still wait for their first passing check.
    """
    running = [b for b in backends if b.state in ROUTABLE_STATES and b.autostop != "off"]
    if len(running) <= keep:
        return None
    serving = [b for b in running if b.checks == PASSING and not b.cordoned]
    # The one machine that can serve is kept while the others are still warming up (their
    # first service check not passed yet): stopped, the next request would have to wake it.
    last = serving[0].machine_id if len(serving) == 1 and len(running) > 1 else None
    idle = [b for b in running if load.get(b.machine_id, 0) == 0 and b.machine_id != last
            and now - idle_since.get(b.machine_id, now) >= idle_for]
    if not idle:
        return None
    if len(running) > 1:
        over_soft = sum(1 for b in running if load.get(b.machine_id, 0) >= b.soft_limit)
        if len(running) - (over_soft + 1) < 1:
            return None
    # The one idle longest; the youngest among equals keeps older machines warm.
    return min(idle, key=lambda b: (idle_since.get(b.machine_id, now), b.created_at))
