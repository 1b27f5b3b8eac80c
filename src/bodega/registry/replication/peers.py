"""Whom a node pulls from in an anti-entropy round: a pure choice, tested without sockets.

Only live members that serve the registry's HTTP routes (``meta["url"]``)
can answer a pull. When versions are known to be missing, the origins of
those versions come first, most missing first: an origin always has all of
its own rows, while a random peer may lack the same ones. The rest of the
round goes to random peers, which is what spreads everything else
epidemically (Corrosion samples its sync peers the same way).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from bodega.registry.membership.members import MemberView, Status


def sync_candidates(members: list[MemberView], local: str) -> list[MemberView]:
    return [m for m in members
            if m.name != local and m.status is Status.ALIVE and m.meta.get("url")]


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
    """``choose_peers`` over the live names membership keeps, in O(count + len(missing)).

    A node pulls every second (four times as often while behind): building the
    candidate list on every pull made its cost grow with the fleet.
    """
    chosen: list[MemberView] = []
    picked: set[str] = set()

    def take(name: str) -> None:
        view = member(name)
        if (view is not None and name not in picked and view.status is Status.ALIVE
                and view.meta.get("url")):
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

    "Behind" means versions are known to be missing (a gap or a notice) or our
    own lost writes were seen: gossip usually fills a gap within a round, and
    if it did not, waiting a whole interval would only prolong the staleness.
    The caller asks every ``step`` seconds.
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
