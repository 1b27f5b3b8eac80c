"""Placement: filters with reasons, the three scorers, sampling, and column == row semantics."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bodega.model.capacity import Ask, Totals, Usage
from bodega.placement import (
    BinPackScorer,
    Candidate,
    CandidateTable,
    PlacementRequest,
    Policy,
    SpreadScorer,
    UtilityScorer,
    Weights,
    rank_candidates,
    rank_region,
)
from bodega.placement.filters import refusal
from bodega.placement.named import scorer_named
from bodega.placement.rank import feasible_rows, refusal_counts
from bodega.placement.scorers import subscores_at


def worker(name: str, *, mcpu: int = 0, mem: int = 0, disk: int = 0, cpus: int = 8,
           memory: int = 8192, status: str = "alive", cordoned: bool = False,
           kinds: tuple[str, ...] = ("shared", "performance"),
           images: frozenset[str] = frozenset(), region: str = "ams",
           images_off: str = "") -> Candidate:
    return Candidate(name, region, f"http://{name}",
                     Totals(cpus=cpus, memory_mb=memory, disk_gb=100, cpu_kinds=kinds),
                     Usage(millicpus=mcpu, memory_mb=mem, disk_gb=disk),
                     cordoned=cordoned, status=status, images=images, images_off=images_off)


def request(**kw: object) -> PlacementRequest:
    values: dict[str, object] = {"app": "web", "ask": Ask(cpus=1, memory_mb=512),
                                 "regions": ("ams",)}
    values.update(kw)
    return PlacementRequest(**values)  # type: ignore[arg-type]


def order(ranking: object) -> list[str]:
    return [s.candidate.name for s in ranking.attempts()]  # type: ignore[attr-defined]


def test_every_refusal_has_its_reason_and_is_counted_once() -> None:
    workers = [
        worker("dead", status="dead"), worker("cord", cordoned=True),
        worker("full", mem=8000), worker("busy", mcpu=8000),
        worker("noperf", kinds=("shared",)), worker("ok"),
    ]
    ranking = rank_candidates(request(ask=Ask(cpu_kind="performance", cpus=1, memory_mb=512)),
                              "ams", workers, Policy())
    reasons = dict(ranking.refusals)
    assert reasons["dead"] == "worker is dead"
    assert reasons["cord"] == "cordoned"
    assert reasons["full"].startswith("memory: needs 512 MB, 192 MB free")
    assert reasons["busy"].startswith("cpu: needs 1000 mcpu, 0 mcpu free")
    assert reasons["noperf"] == "cpu kind performance not offered"
    assert ranking.refused_by_kind == {"not_alive": 1, "cordoned": 1, "memory": 1, "cpu": 1,
                                       "cpu_kind": 1}
    assert order(ranking) == ["ok"]


def test_an_image_machine_goes_only_where_images_run_and_the_rest_say_why() -> None:
    no_cgroups = "no cgroup hierarchy is mounted at /sys/fs/cgroup (runc and crun need one)"
    workers = [worker("plain", images_off=no_cgroups), worker("oci")]
    ranking = rank_candidates(request(image="127.0.0.1:5000/web:1", needs_images=True),
                              "ams", workers, Policy())
    assert order(ranking) == ["oci"]
    assert dict(ranking.refusals) == {"plain": f"runs no images: {no_cgroups}"}
    assert ranking.refused_by_kind == {"no_image_driver": 1}
    # A process machine (its image a label) may go to either.
    assert sorted(order(rank_candidates(request(image="process"), "ams", workers,
                                        Policy()))) == ["oci", "plain"]


def test_a_volume_pins_the_machine_to_its_host() -> None:
    workers = [worker("a"), worker("b"), worker("c")]
    req = request(pinned_worker="b", pinned_reason="volume vol_1 is on b")
    ranking = rank_candidates(req, "ams", workers, Policy())
    assert order(ranking) == ["b"]
    assert dict(ranking.refusals)["a"] == "volume vol_1 is on b"


def test_utility_prefers_the_middle_over_idle_and_nearly_full_hosts() -> None:
    # 8 cpus at ratio 4: a shared cpu costs 250 mcpu. After placing: idle 3 %, mid 50 %, full 97 %.
    workers = [worker("idle"), worker("mid", mcpu=3750, mem=3584),
               worker("full", mcpu=7500, mem=7424)]
    assert order(rank_candidates(request(), "ams", workers, Policy())) == ["mid", "idle", "full"]


def test_binpack_fills_the_fullest_and_spread_the_emptiest() -> None:
    workers = [worker("idle"), worker("mid", mcpu=3750, mem=3584),
               worker("full", mcpu=7500, mem=7424)]
    assert order(rank_candidates(request(), "ams", workers, Policy(BinPackScorer())))[0] == "full"
    assert order(rank_candidates(request(), "ams", workers, Policy(SpreadScorer())))[0] == "idle"


def test_nomad_binpack_formula() -> None:
    scorer = BinPackScorer(weights=Weights(app=0, standby=0, image=0))
    # After placing: cpu 50 %, memory 50 % -> 20 - (10^0.5 + 10^0.5) = 13.675 -> /18
    score, subs = scorer.score(request(ask=Ask(cpus=4, memory_mb=4096, cpu_kind="performance")),
                               worker("w"))
    assert score == pytest.approx((20 - 2 * math.sqrt(10)) / 18)
    assert subs == {"binpack": pytest.approx(score)}


def test_an_app_spreads_and_a_standby_avoids_its_primary() -> None:
    workers = [worker("a"), worker("b"), worker("c")]
    spread = rank_candidates(request(colocated={"a": 3, "b": 1}), "ams", workers, Policy())
    assert order(spread)[0] == "c"
    assert [s.subscores["app"] for s in spread.top()[1:]] == [-1.0, -1.0]  # up to 1
    graded = Policy(scorer_named("utility", Weights(app=0.25)))
    spread = rank_candidates(request(colocated={"a": 3, "b": 1}), "ams", workers, graded)
    assert order(spread) == ["c", "b", "a"]
    assert spread.top()[2].subscores["app"] == pytest.approx(-0.75)
    standby = rank_candidates(request(standby_workers=frozenset({"c"}), colocated={"a": 1}),
                              "ams", workers, Policy())
    assert order(standby)[-1] == "c"


@pytest.mark.parametrize("fill", [0.0, 0.1, 0.3, 0.5, 0.7, 0.85])
@pytest.mark.parametrize("policy", ["utility", "fgd", "binpack", "spread"])
def test_an_apps_second_machine_goes_to_another_host_however_full_the_first(
        fill: float, policy: str) -> None:
    """Two machines of an app (a deploy's HA pair) share a host only when no other has
    room: the first one there outweighs any preference of a curve for its fill."""
    first = worker("first", mcpu=int(8000 * fill), mem=int(8192 * fill))
    for other in (worker("empty"), worker("full-ish", mcpu=7000, mem=7168)):
        ranking = rank_candidates(request(colocated={"first": 1}), "ams", [first, other],
                                  Policy(scorer_named(policy)))
        assert order(ranking)[0] == other.name, (policy, fill, other.name)


def test_a_cached_image_earns_a_bonus() -> None:
    workers = [worker("cold"), worker("warm", images=frozenset({"img:1"}))]
    ranking = rank_candidates(request(image="img:1"), "ams", workers, Policy())
    assert order(ranking) == ["warm", "cold"]
    assert ranking.top()[0].subscores["image"] == pytest.approx(0.1)


def test_equal_scores_rank_by_name_so_a_view_always_ranks_the_same() -> None:
    workers = [worker(n) for n in ("c", "a", "b")]
    assert order(rank_candidates(request(), "ams", workers, Policy())) == ["a", "b", "c"]


def test_power_of_two_choices_asks_every_feasible_worker_once_and_prefers_the_better() -> None:
    workers = [worker(f"w{i:03}", mcpu=(i % 30) * 250) for i in range(100)]
    workers.append(worker("full", mem=8192))
    policy = Policy(sample=2, sample_above=10)
    ranking = rank_candidates(request(), "ams", workers, policy, random.Random(7))
    asked = order(ranking)
    assert sorted(asked) == sorted(w.name for w in workers if w.name != "full")
    assert ranking.sampled == 2
    # Each pick is the better of two random ones: on average better than a random pick.
    firsts = [next(rank_candidates(request(), "ams", workers, policy, random.Random(s))
                   .attempts()).score for s in range(200)]
    scorer = UtilityScorer()
    mean_random = sum(scorer.score(request(), w)[0] for w in workers[:100]) / 100
    assert sum(firsts) / len(firsts) > mean_random


def test_weights_override_by_api_name() -> None:
    w = Weights().with_overrides({"spread": 0, "region": 50, "cpu": 2})
    assert (w.app, w.cpu) == (0, 2)
    with pytest.raises(ValueError, match="must not be negative"):
        Weights().with_overrides({"cpu": -1})


def test_table_rows_follow_puts_and_removes() -> None:
    table = CandidateTable("ams", [worker("a"), worker("b"), worker("c")])
    table.remove("a")
    table.put(worker("b", mem=8192))  # b is full now
    table.put(worker("d"))
    assert sorted(table.names()) == ["b", "c", "d"]
    ranking = rank_candidates(request(), "ams", [table.candidate(i) for i in range(len(table))],
                              Policy())
    assert sorted(order(ranking)) == ["c", "d"]
    rows, refused = feasible_rows(request(), table)
    assert sorted(table.candidate(int(i)).name for i in rows) == ["c", "d"]
    assert [table.candidate(int(i)).name for i in refused] == ["b"]


def test_an_explanation_is_scored_on_the_view_it_was_ranked_on() -> None:
    # Two feasible workers, fewer than an explanation lists: the top is scored when first
    # asked for and kept, so a claim that changes the table afterwards (the broker counts
    # the machine on its winner at once) does not rewrite why the winner won.
    table = CandidateTable("ams", [worker("a", mem=4096), worker("b")])
    ranking = rank_region(request(), table, Policy())
    before = [(s.candidate.name, s.score) for s in ranking.top()]
    table.put(worker("a", mem=8000))  # the claim
    assert [(s.candidate.name, s.score) for s in ranking.top()] == before
    assert [s.candidate.name for s in ranking.top()] == [name for name, _ in before]


# -- columns agree with the row-at-a-time definitions -----------------------------------
candidates = st.builds(
    lambda i, cpus, mcpu, memory, mem, disk, status, cordoned, kinds, ratio, image, off, iso:
    Candidate(
        f"w{i}", "ams", "http://w",
        Totals(cpus=cpus, memory_mb=memory, disk_gb=50, cpu_kinds=kinds, shared_cpu_ratio=ratio,
               isolations=iso),
        Usage(millicpus=mcpu, memory_mb=mem, disk_gb=disk), cordoned=cordoned, status=status,
        images=frozenset({"img"}) if image else frozenset(), images_off=off),
    st.integers(0, 10_000), st.integers(1, 16), st.integers(0, 17_000), st.integers(256, 32768),
    st.integers(0, 33000), st.integers(0, 60), st.sampled_from(["alive", "alive", "suspect"]),
    st.booleans(), st.sampled_from([("shared",), ("performance",), ("shared", "performance")]),
    st.sampled_from([1.0, 2.0, 3.0, 4.0]), st.booleans(), st.sampled_from(["", "", "no runc"]),
    st.sampled_from([("container",), ("container", "sandbox"), ("sandbox",)]),
)
asks = st.builds(Ask, cpu_kind=st.sampled_from(["shared", "performance"]),
                 isolation=st.sampled_from(["container", "container", "sandbox", "vm"]),
                 cpus=st.integers(0, 8), memory_mb=st.integers(0, 16384),
                 disk_gb=st.integers(0, 20))


@settings(max_examples=200, deadline=None)
@given(st.lists(candidates, min_size=1, max_size=25, unique_by=lambda c: c.name), asks,
       st.sampled_from([UtilityScorer(), UtilityScorer(weights=Weights(hole=1.0)),
                        UtilityScorer(weights=Weights(fragmentation=1.0)),
                        BinPackScorer(), SpreadScorer()]), st.booleans(), st.booleans())
def test_columns_filter_and_score_exactly_like_rows(
    workers: list[Candidate], ask: Ask, scorer: UtilityScorer, pin: bool, image: bool
) -> None:
    req = request(ask=ask, image="img", needs_images=image, colocated={workers[0].name: 2},
                  standby_workers=frozenset({workers[-1].name}),
                  pinned_worker=workers[0].name if pin else None)
    table = CandidateTable("ams", workers)
    rows, refused = feasible_rows(req, table)
    feasible = {table.candidate(int(i)).name for i in rows}
    assert feasible == {w.name for w in workers if refusal(req, w) is None}
    assert sum(refusal_counts(req, table).values()) == len(refused)
    totals, parts = scorer.breakdown(req, table, rows)
    for k, (i, value) in enumerate(zip(rows, totals, strict=True)):
        score, subscores = scorer.score(req, table.candidate(int(i)), table)
        assert value == pytest.approx(score)
        assert subscores_at(parts, k) == pytest.approx(subscores)
        assert list(subscores_at(parts, k)) == list(subscores)  # listed in the same order


def test_counts_kept_by_the_table_score_like_the_mapping() -> None:
    workers = [worker(f"w{i}") for i in range(60)]
    colocated = {f"w{i}": i % 5 for i in range(0, 60, 2)}  # more than FEW: the vector path
    req = request(colocated=colocated)
    plain = CandidateTable("ams", workers)
    tracked = CandidateTable("ams", workers)
    for name, count in colocated.items():
        tracked.add_count("web", name, count)
    tracked.remove("w59")  # rows move: the counts move with them
    plain.remove("w59")
    tracked.put(worker("late"))
    plain.put(worker("late"))
    rows_plain, _ = feasible_rows(req, plain)
    rows_tracked, _ = feasible_rows(req, tracked)
    scorer = UtilityScorer()
    by_name_plain = dict(zip((plain.candidate(int(i)).name for i in rows_plain),
                             scorer.breakdown(req, plain, rows_plain)[0], strict=True))
    by_name_tracked = dict(zip((tracked.candidate(int(i)).name for i in rows_tracked),
                               scorer.breakdown(req, tracked, rows_tracked)[0], strict=True))
    assert by_name_plain == pytest.approx(by_name_tracked)
    assert by_name_tracked["w4"] < by_name_tracked["w1"]  # w4 holds 4 machines of the app


@pytest.mark.parametrize("width", [1, 2])
def test_the_plan_is_the_ranking_in_rounds_and_the_same_for_the_same_inputs(width: int) -> None:
    """A placement's plan (``rounds``) is a function of the candidates and the ask: the
    ranked workers, in order, ``width`` at a time (two when hedging); the refused ones are
    in no round."""
    table = CandidateTable("ams", [worker(f"w{i}", mem=512 * i) for i in range(5)]
                           + [worker("full", mem=8192), worker("gone", status="dead")])
    ranked = order(rank_region(request(), table, Policy()))
    rounds = list(rank_region(request(), table, Policy()).rounds(width))
    assert [s.candidate.name for batch in rounds for s in batch] == ranked
    assert {"full", "gone"}.isdisjoint(ranked)
    assert [len(batch) for batch in rounds] == [width] * (5 // width) + [1] * (5 % width)
    again = [[s.candidate.name for s in b]
             for b in rank_region(request(), table, Policy()).rounds(width)]
    assert again == [[s.candidate.name for s in b] for b in rounds]
