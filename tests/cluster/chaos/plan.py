"""A campaign's faults, planned from a seed before anything runs (pure).

``plan`` lays out ``count`` faults on a timeline: each starts a few seconds
after the one before and lasts its own while, so several are on at once. The
rules keep the run meaningful rather than gentle:

- one fault at a time per host (a killed host's link is not also cut);
- at most ``MAX_DOWN`` hosts gone (killed or cut off) at once, so every
  machine of the app is never gone together and some API always answers;
- a fault that needs a part a host lacks is not planned there (no broker,
  no proxy: no broker-kill, no proxy-kill; a disk fills only where the data
  dir is a small tmpfs, a clock steps only where it is faked).

The same seed and hosts give the same plan, so a failed run is run again by
its seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

MAX_DOWN = 2
DOWN = frozenset({"host-kill", "link-down"})


@dataclass(frozen=True)
class HostShape:
    name: str
    broker: bool = True
    proxy: bool = True
    small_disk: bool = False
    skewed: bool = False  # its wall clock is faked, so a fault can step it


@dataclass(frozen=True)
class PlannedFault:
    kind: str
    host: str | None  # None: the whole cluster (a key rotation)
    at: float  # seconds from the campaign's start
    lasts: float  # seconds the fault is held before it is healed (0: instant)
    peer: str | None = None  # the other end of a one-way loss
    percent: int = 0  # how much of it is lost


# kind -> (weight, shortest, longest hold in seconds)
KINDS: dict[str, tuple[int, float, float]] = {
    "host-kill": (3, 4.0, 12.0),
    "link-down": (3, 4.0, 12.0),
    "loss-one-way": (3, 8.0, 20.0),
    "slow-link": (2, 8.0, 20.0),  # 1 Mbit/s each way, up to 250 ms queued
    "worker-stop": (2, 16.0, 24.0),  # past the failure detector's suspicion timeout
    "disk-full": (1, 6.0, 12.0),
    "clock-step": (2, 10.0, 25.0),  # the wall clock jumps, then jumps back
    "agent-kill": (2, 0.0, 0.0),
    "broker-kill": (2, 0.0, 0.0),
    "proxy-kill": (2, 0.0, 0.0),
    "worker-kill": (2, 0.0, 0.0),
    "wg-peer-remove": (2, 0.0, 0.0),
    "key-rotate": (1, 0.0, 0.0),
}
# What a fault that is over still holds its host for: a killed part is restarted by the
# host's supervisor, a killed host by its operator; the plan leaves room for that.
SETTLING = {"host-kill": 20.0, "agent-kill": 6.0, "broker-kill": 6.0, "proxy-kill": 6.0,
            "worker-kill": 6.0, "worker-stop": 4.0, "link-down": 2.0, "disk-full": 2.0,
            "slow-link": 2.0, "clock-step": 2.0}


def fits(kind: str, host: HostShape) -> bool:
    if kind == "broker-kill":
        return host.broker
    if kind == "proxy-kill":
        return host.proxy
    if kind == "disk-full":
        return host.small_disk
    if kind == "clock-step":
        return host.skewed
    return True


def plan(seed: int, hosts: list[HostShape], count: int, *, gap: tuple[float, float] = (1.5, 4.0),
         start: float = 5.0) -> list[PlannedFault]:
    """``count`` faults on ``hosts``; see the module's rules."""
    if len(hosts) < 2:
        raise ValueError("a campaign needs two hosts or more")
    rng = random.Random(seed)
    busy: dict[str, float] = {h.name: 0.0 for h in hosts}  # host -> free again at
    down: list[tuple[float, float]] = []  # (from, until) of host-kill and link-down faults
    out: list[PlannedFault] = []
    at = start
    while len(out) < count:
        at += rng.uniform(*gap)
        kind = rng.choices(list(KINDS), [w for w, _, _ in KINDS.values()])[0]
        lo, hi = KINDS[kind][1:]
        lasts = round(rng.uniform(lo, hi), 1)
        if kind == "key-rotate":
            out.append(PlannedFault(kind, None, round(at, 1), 0.0))
            continue
        free = [h for h in hosts if busy[h.name] <= at and fits(kind, h)]
        if kind in DOWN:
            overlapping = sum(1 for a, b in down if a < at + lasts + SETTLING[kind] and at < b)
            if overlapping >= MAX_DOWN:
                continue
        if not free:
            continue
        host = rng.choice(free)
        until = at + lasts + SETTLING.get(kind, 0.0)
        busy[host.name] = until
        if kind in DOWN:
            down.append((at, until))
        peer, percent = None, 0
        if kind == "loss-one-way":
            peer = rng.choice([h.name for h in hosts if h.name != host.name])
            percent = rng.choice([30, 50, 80])
        out.append(PlannedFault(kind, host.name, round(at, 1), lasts, peer, percent))
    return out


def span(faults: list[PlannedFault]) -> float:
    """When the last fault of the plan is healed."""
    return max((f.at + f.lasts for f in faults), default=0.0)
