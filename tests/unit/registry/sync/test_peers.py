"""Whom to pull from and when: pure decisions of the anti-entropy loop."""

from __future__ import annotations

import itertools
import random

from hypothesis import given
from hypothesis import strategies as st

from bodega.registry.membership.core.members import MemberView, Role, Status
from bodega.registry.replication.core.known import Known
from bodega.registry.sync.core.peers import (
    GapWatch,
    SyncPacer,
    choose_alive,
    choose_peers,
    overlap,
    sync_candidates,
)


def member(name: str, status: Status = Status.ALIVE, url: bool = True) -> MemberView:
    return MemberView(name, ("127.0.0.1", 1), Role.WORKER, "ams",
                      {"sync": f"http://{name}"} if url else {}, status, 0, 1)


def test_only_other_live_members_that_serve_sync_are_candidates() -> None:
    members = [member("me"), member("a"), member("b", Status.SUSPECT), member("c", Status.DEAD),
               member("d", url=False), member("e")]
    assert [m.name for m in sync_candidates(members, "me")] == ["a", "e"]


def test_origins_with_missing_versions_come_first_most_missing_first() -> None:
    candidates = [member(n) for n in ("a", "b", "c", "d")]
    chosen = choose_peers(candidates, {"c": 2, "b": 9, "gone": 50}, 3, random.Random(1))
    assert [m.name for m in chosen[:2]] == ["b", "c"]
    assert len(chosen) == 3
    assert len({m.name for m in chosen}) == 3


def test_random_peers_spread_over_the_members() -> None:
    candidates = [member(f"n{i}") for i in range(10)]
    rng = random.Random(7)
    seen = {choose_peers(candidates, {}, 1, rng)[0].name for _ in range(200)}
    assert len(seen) == 10
    assert choose_peers([], {}, 2, rng) == []


def test_the_pacer_pulls_every_interval_and_four_times_as_often_while_behind() -> None:
    pacer = SyncPacer(1.0, 1, random.Random(3))
    t, pulls = 0.0, []
    while t < 20:
        if pacer.due(t, behind=False):
            pulls.append(t)
        t += pacer.step
    gaps = [b - a for a, b in itertools.pairwise(pulls)]
    assert all(0.7 - 1e-9 <= g <= 1.3 + pacer.step for g in gaps)
    assert pacer.due(t, behind=True) == 2
    assert pacer.due(t + pacer.step, behind=True) == 2


def test_choosing_among_alive_names_takes_origins_first_and_only_live_servers() -> None:
    views = {m.name: m for m in [member("a"), member("b"), member("c", Status.SUSPECT),
                                 member("d", url=False), member("e")]}
    alive = ["a", "b", "d", "e"]
    chosen = choose_alive(alive, views.get, {"e": 3, "c": 9, "gone": 1}, 2, random.Random(1))
    assert chosen[0].name == "e"  # c is missing more, but suspect: not a server now
    assert len(chosen) == 2
    assert all(m.name in {"a", "b", "e"} for m in chosen)
    rng = random.Random(5)
    seen = {choose_alive(alive, views.get, {}, 1, rng)[0].name for _ in range(200)}
    assert seen == {"a", "b", "e"}
    assert choose_alive([], views.get, {}, 2, rng) == []


def test_a_gap_gossip_closes_within_a_look_does_not_hurry_a_pull() -> None:
    watch = GapWatch()
    assert not watch.lasting({"w1": ((3, 4),)})  # just seen: gossip may still bring it
    assert not watch.lasting({"w1": ((9, 9),)})  # 3-4 came; 9 is another, new gap
    assert not watch.lasting({})
    assert not watch.lasting({"w2": ((9, 9),)})  # the same versions of another origin


def test_a_gap_still_open_at_the_next_look_hurries_a_pull_until_it_closes() -> None:
    watch = GapWatch()
    assert not watch.lasting({"w1": ((3, 6),)})
    assert watch.lasting({"w1": ((5, 6), (9, 9))})  # 5-6 outlived the look
    assert watch.lasting({"w1": ((6, 6), (9, 10))})
    assert not watch.lasting({"w2": ((1, 1),)})  # w1 is whole again


def _runs(versions: set[int]) -> tuple[tuple[int, int], ...]:
    """``versions`` as the sorted, disjoint spans a ``Known`` keeps its gaps in."""
    return Known(top=41, gaps=tuple(
        (group[0], group[-1]) for group in (
            [v for _, v in run] for _, run in itertools.groupby(
                enumerate(sorted(versions)), key=lambda iv: iv[1] - iv[0])))).gaps


spans = st.sets(st.integers(1, 40), max_size=20).map(_runs)


@given(spans, spans)
def test_spans_overlap_exactly_when_they_share_a_version(a: tuple[tuple[int, int], ...],
                                                         b: tuple[tuple[int, int], ...]) -> None:
    def versions(spans: tuple[tuple[int, int], ...]) -> set[int]:
        return {v for lo, hi in spans for v in range(lo, hi + 1)}

    assert overlap(a, b) == bool(versions(a) & versions(b))


class Replica:
    """What the pacer reads of a replica, set by hand."""

    def __init__(self, gaps: dict[str, tuple[tuple[int, int], ...]], urgent: bool) -> None:
        self._gaps, self.urgent = gaps, urgent

    def gaps(self) -> dict[str, tuple[tuple[int, int], ...]]:
        return self._gaps


def test_the_pacer_is_behind_for_a_lasting_gap_or_an_urgent_replica_and_still_looks() -> None:
    watch = GapWatch()
    assert watch.behind(Replica({}, urgent=True))
    assert not watch.behind(Replica({"w1": ((3, 4),)}, urgent=False))
    assert watch.behind(Replica({"w1": ((4, 4),)}, urgent=False))  # 4 outlived a look
    assert watch.behind(Replica({"w2": ((7, 7),)}, urgent=True))  # seen while urgent:
    assert watch.behind(Replica({"w2": ((7, 7),)}, urgent=False))  # still remembered
