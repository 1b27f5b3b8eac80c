"""Whom a node pulls from in an anti-entropy round: a pure choice, tested without sockets.

Only live members that hold a replica and serve its HTTP routes
(``meta["sync"]``: a host's registry agent, or a daemon with a registry of its own)
can answer a pull. When versions are known to be missing, the origins of
those versions come first, most missing first: an origin always has all of
its own rows, while a random peer may lack the same ones. The rest of the
round goes to random peers, which is what spreads everything else
epidemically (Corrosion samples its sync peers the same way).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from bodega.registry.membership.core.members import MemberView, Status
from bodega.registry.replication.core.known import Span

# A row written here is pushed to EAGER_PEERS members at once, besides gossip; a host's
# agent also pushes a row new to it on to as many, once. A daemon with a replica of its
# own pulls what it lacks every SYNC_INTERVAL, an agent every AGENT_SYNC_INTERVAL. At 100
# hosts and 100 creates/s (the simulator, docs/benchmarks.md) a create reached every host
# in 3.5 s at p99 when agents pushed only their host's rows to 3 and pulled every 1 s,
# in 1.5 s pushing on to 3, in 0.69 s pushing on to 4 and pulling every 0.5 s.
EAGER_PEERS = 4
SYNC_INTERVAL = 1.0
AGENT_SYNC_INTERVAL = 0.5


def sync_candidates(members: list[MemberView], local: str) -> list[MemberView]:
    return [m for m in members
            if m.name != local and m.status is Status.ALIVE and m.meta.get("sync")]


def choose_peers(candidates: list[MemberView], missing: dict[str, int], count: int,
                 rng: random.Random) -> list[MemberView]:
    by_name = {m.name: m for m in candidates}
    chosen: list[MemberView] = []
    for origin in sorted(missing, key=lambda o: (-missing[o], o)):
        if len(chosen) >= count:
            break
        member = by_name.pop(origin, None)
        if member is not None:
            chosen.append(member)
    rest = sorted(by_name.values(), key=lambda m: m.name)
    chosen += rng.sample(rest, min(count - len(chosen), len(rest))) if count > len(chosen) else []
    return chosen


def choose_alive(alive: Sequence[str], member: Callable[[str], MemberView | None],
                 missing: dict[str, int], count: int, rng: random.Random) -> list[MemberView]:
    """``choose_peers`` over live names membership keeps (its replica holders,
    ``Swim.alive_holders``), in O(count + len(missing)).

    A node pulls every second (four times as often while behind): building the
    candidate list on every pull made its cost grow with the fleet.
    """
    chosen: list[MemberView] = []
    picked: set[str] = set()

    def take(name: str) -> None:
        view = member(name)
        if (view is not None and name not in picked and view.status is Status.ALIVE
                and view.meta.get("sync")):
            chosen.append(view)
            picked.add(name)

    for origin in sorted(missing, key=lambda o: (-missing[o], o)):
        if len(chosen) >= count:
            break
        take(origin)
    want = count - len(chosen)
    if want > 0:
        for name in rng.sample(alive, min(len(alive), 2 * want + 2)):
            if len(chosen) >= count:
                break
            take(name)
    return chosen


class SyncPacer:
    """When to pull: every ``interval`` (jittered ±30%), every quarter of it while behind.

    "Behind" means versions have been missing for a look (``GapWatch``), or our
    own lost writes were seen, or the last reply was cut: waiting a whole
    interval would only prolong the staleness. The caller asks every ``step``
    seconds.
    """

    def __init__(self, interval: float, peers: int, rng: random.Random) -> None:
        self.interval = interval
        self.peers = peers
        self.step = interval / 4
        self._rng = rng
        self._next: float | None = None

    def due(self, now: float, behind: bool) -> int:
        """How many peers to pull from now (0: not yet); one more while behind."""
        if self._next is None:
            self._next = now + self._rng.uniform(0, self.interval)
        if not behind and now < self._next:
            return 0
        self._next = now + self.interval * self._rng.uniform(0.7, 1.3)
        return self.peers + int(behind)


class Paced(Protocol):
    """What the pacer reads of a replica (``Replica``)."""

    def gaps(self) -> dict[str, tuple[Span, ...]]: ...

    @property
    def urgent(self) -> bool: ...


class GapWatch:
    """Which gaps outlive a look of the pacer.

    Gossip delivers an origin's rows a little out of order, so while a node
    writes steadily some gap of its versions is open at nearly every look, and
    gossip closes each within a round. Hurrying for those made every node pull
    four times a second, from the busiest origin first, which then spent most of
    its CPU answering pulls. A gap still open, any version of it still unseen,
    at the next look is one gossip dropped: only that one hurries a pull (a
    look later than at once, ``SyncPacer.step``).
    """

    def __init__(self) -> None:
        self._last: dict[str, tuple[Span, ...]] = {}

    def lasting(self, gaps: Mapping[str, tuple[Span, ...]]) -> bool:
        """Whether a version unseen at the last look is unseen still; ``gaps``: the unseen
        versions of each origin now (``Replica.gaps``), remembered for the next look."""
        found = any(overlap(self._last.get(origin, ()), spans) for origin, spans in gaps.items())
        self._last = dict(gaps)
        return found

    def behind(self, replica: Paced) -> bool:
        """What ``SyncPacer.due`` is told at this look: a lasting gap, or an urgent replica."""
        return self.lasting(replica.gaps()) or replica.urgent


def overlap(a: Sequence[Span], b: Sequence[Span]) -> bool:
    """Whether two sorted lists of disjoint inclusive spans share a version."""
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False
