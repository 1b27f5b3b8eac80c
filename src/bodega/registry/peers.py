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
from collections.abc import Callable, Hashable

from bodega.registry.members import MemberView, Status


def sync_candidates(members: list[MemberView], local: str) -> list[MemberView]:
    return [m for m in members
            if m.name != local and m.status is Status.ALIVE and m.meta.get("url")]


class Candidates:
    """``sync_candidates`` and an index by name, rebuilt only when membership changes.

    A node pulls every second (four times as often while behind): building
    and sorting the member list on every pull made its cost grow with the fleet.
    """

    def __init__(self, local: str) -> None:
        self._local = local
        self._key: Hashable = None
        self._list: list[MemberView] = []
        self._by_name: dict[str, MemberView] = {}

    def get(self, key: Hashable, members: Callable[[], list[MemberView]]
            ) -> tuple[list[MemberView], dict[str, MemberView]]:
        if key != self._key or key is None:
            self._key = key
            self._list = sorted(sync_candidates(members(), self._local), key=lambda m: m.name)
            self._by_name = {m.name: m for m in self._list}
        return self._list, self._by_name


def choose_peers(candidates: list[MemberView], missing: dict[str, int], count: int,
                 rng: random.Random, by_name: dict[str, MemberView] | None = None
                 ) -> list[MemberView]:
    """Origins with missing versions first, then random candidates (sorted by name).

    Work is O(count + len(missing)) when ``by_name`` indexes ``candidates``.
    """
    if by_name is None:
        candidates = sorted(candidates, key=lambda m: m.name)
        by_name = {m.name: m for m in candidates}
    chosen: list[MemberView] = []
    picked: set[str] = set()
    for origin in sorted(missing, key=lambda o: (-missing[o], o)):
        if len(chosen) >= count:
            break
        member = by_name.get(origin)
        if member is not None:
            chosen.append(member)
            picked.add(origin)
    want = count - len(chosen)
    if want > 0:
        drawn = rng.sample(candidates, min(want + len(picked), len(candidates)))
        chosen += [m for m in drawn if m.name not in picked][:want]
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
