"""The fragmentation term: the scarce holes of bigger shapes a placement would take."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bodega.model.capacity import Ask, Totals, Usage
from bodega.placement import (
    Candidate,
    CandidateTable,
    PlacementRequest,
    Policy,
    UtilityScorer,
    Weights,
    rank_region,
)
from bodega.placement.fragmentation import MISSED_LIMIT, holes_taken
from bodega.placement.named import scorer_named

SMALL = Ask(cpu_kind="shared", cpus=1, memory_mb=256)
EIGHT = Ask(cpu_kind="performance", cpus=8, memory_mb=16384)
SIXTEEN = Ask(cpu_kind="performance", cpus=16, memory_mb=32768)


def host(name: str, cpus: int, free_cpus: float, *, status: str = "alive",
         cordoned: bool = False) -> Candidate:
    # Memory is plentiful everywhere so that only cpus decide.
    return Candidate(name, "ams", f"http://{name}",
                     Totals(cpus=cpus, memory_mb=cpus * 8192),
                     Usage(millicpus=int((cpus - free_cpus) * 1000), memory_mb=cpus * 2048),
                     status=status, cordoned=cordoned)


def table(hosts: list[Candidate], mix: dict[Ask, int]) -> CandidateTable:
    out = CandidateTable("ams", hosts)
    for ask, count in mix.items():
        for _ in range(count):
            out.shapes.note(ask)
    return out


def cost(ask: Ask, t: CandidateTable) -> dict[str, float]:
    request = PlacementRequest(app="web", ask=ask, regions=("ams",))
    rows = np.arange(len(t), dtype=np.int64)
    return dict(zip(t.names(), holes_taken(request, t, rows).tolist(), strict=True))


def first(policy: str, ask: Ask, t: CandidateTable) -> str:
    request = PlacementRequest(app="web", ask=ask, regions=("ams",))
    return next(rank_region(request, t, Policy(scorer_named(policy))).attempts()).candidate.name


def test_a_small_machine_is_kept_off_the_last_eight_cpu_hole() -> None:
    # "big" has the region's only 8 free cpus; "small" has 2. The curves prefer big (87.5 %
    # used after placing, against 89 %); one performance-8x in ten creates makes that last
    # hole scarce, so fgd sends the shared cpu to small and keeps the hole.
    t = table([host("big", 64, 8.0), host("small", 16, 2.0)], {SMALL: 90, EIGHT: 10})
    costs = cost(SMALL, t)
    assert costs["small"] == 0.0
    assert costs["big"] > 0.5
    assert first("utility", SMALL, t) == "big"
    assert first("fgd", SMALL, t) == "small"


def test_plenty_of_holes_cost_next_to_nothing() -> None:
    # 60 eight-cpu slots (30 hosts with 16 free) against about 5 performance-8x expected in
    # the next HORIZON (500) creates at 1 in 100; the last slot, as above, costs 0.82.
    hosts = [host(f"h{i}", 32, 16.0) for i in range(30)]
    assert max(cost(SMALL, table(hosts, {SMALL: 99, EIGHT: 1})).values()) < 1e-4
    last = table([host("big", 64, 8.0), host("small", 16, 2.0)], {SMALL: 99, EIGHT: 1})
    # (about: the newest creates weigh a little more than 1 in 100)
    assert cost(SMALL, last)["big"] == pytest.approx(math.exp(-1 / 5), rel=0.01)


def test_a_big_machine_takes_the_hole_that_fits_it_best() -> None:
    # Placing the 8x on "sixteen" would take the only 16-cpu slot (scarce, 16x arrive too);
    # on "eight" it takes only an 8-cpu slot, its own shape's, which is not charged.
    t = table([host("eight", 16, 8.0), host("sixteen", 32, 16.0)],
              {SMALL: 80, EIGHT: 10, SIXTEEN: 10})
    costs = cost(EIGHT, t)
    assert costs["eight"] == 0.0
    assert costs["sixteen"] > 0.5
    assert first("fgd", EIGHT, t) == "eight"


def test_dead_and_cordoned_hosts_hold_no_holes() -> None:
    # Eight-cpu holes on hosts nobody can use do not make the live one less scarce.
    alone = table([host("big", 64, 8.0), host("small", 16, 2.0)], {SMALL: 90, EIGHT: 10})
    crowd = table([host("big", 64, 8.0), host("small", 16, 2.0)]
                  + [host(f"dead{i}", 64, 32.0, status="dead") for i in range(5)]
                  + [host(f"off{i}", 64, 32.0, cordoned=True) for i in range(5)],
                  {SMALL: 90, EIGHT: 10})
    assert cost(SMALL, crowd)["big"] == pytest.approx(cost(SMALL, alone)["big"])


def test_no_mix_no_term() -> None:
    t = table([host("big", 64, 8.0), host("small", 16, 2.0)], {})
    assert cost(SMALL, t) == {"big": 0.0, "small": 0.0}


def test_a_region_turning_creates_away_keeps_no_holes() -> None:
    # Once more than MISSED_LIMIT of recent creates found no room, a kept hole would only
    # turn many small machines away for one big one: the term fades to nothing.
    t = table([host("big", 64, 8.0), host("small", 16, 2.0)], {SMALL: 90, EIGHT: 10})
    before = cost(SMALL, t)["big"]
    misses = int(100 * MISSED_LIMIT) + 1
    for _ in range(misses):
        t.shapes.note(SMALL)
        t.shapes.missed()
    assert before > 0.5
    assert cost(SMALL, t)["big"] == 0.0
    assert first("fgd", SMALL, t) == "big"


def test_the_subscore_is_explained_and_matches_the_ranking() -> None:
    t = table([host("big", 64, 8.0), host("small", 16, 2.0)], {SMALL: 90, EIGHT: 10})
    request = PlacementRequest(app="web", ask=SMALL, regions=("ams",))
    ranking = rank_region(request, t, Policy(scorer_named("fgd")))
    explained = {s.candidate.name: s for s in ranking.top()}
    assert explained["big"].subscores["fragmentation"] < 0
    assert "fragmentation" not in explained["small"].subscores


free = st.floats(0, 64).map(lambda f: round(f * 4) / 4)  # shared cpus come in quarters
sizes = st.sampled_from([8, 16, 32, 64])
asks = st.sampled_from([SMALL, Ask(cpu_kind="shared", cpus=4, memory_mb=4096),
                        Ask(cpu_kind="performance", cpus=2, memory_mb=4096), EIGHT, SIXTEEN])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(sizes, free), min_size=1, max_size=12),
       st.lists(st.tuples(asks, st.integers(1, 20)), min_size=1, max_size=5), asks)
def test_costs_are_never_negative_and_score_one_by_one_as_all_at_once(
        shapes: list[tuple[int, float]], mix: list[tuple[Ask, int]], ask: Ask) -> None:
    hosts = [host(f"h{i}", size, min(f, size)) for i, (size, f) in enumerate(shapes)]
    t = table(hosts, dict(mix))
    costs = cost(ask, t)
    assert all(c >= 0.0 for c in costs.values())
    biggest = max(a.cpus * (1000 if a.cpu_kind == "performance" else 250) for a, _ in mix)
    if ask.cpus * (1000 if ask.cpu_kind == "performance" else 250) >= biggest:
        assert all(c == 0.0 for c in costs.values())  # nothing bigger to keep a hole for
    scorer = UtilityScorer(weights=Weights(fragmentation=1.0))
    request = PlacementRequest(app="web", ask=ask, regions=("ams",))
    rows = np.arange(len(t), dtype=np.int64)
    together, _parts = scorer.breakdown(request, t, rows)
    alone = [scorer.score(request, c, t)[0] for c in hosts]
    assert together.tolist() == pytest.approx(alone)


def test_the_broker_runs_fgd_by_name_and_takes_its_weight() -> None:
    from bodega.broker.config import POLICIES, BrokerConfig
    from bodega.cli.daemons.broker import parse_weights
    from bodega.placement.named import DEFAULT_POLICY

    assert "fgd" in POLICIES
    base = BrokerConfig(name="b", data_dir=Path("."))
    assert base.placement_policy().name == DEFAULT_POLICY == "utility"
    fgd = BrokerConfig(name="b", data_dir=Path("."), policy="fgd")
    assert fgd.placement_policy().scorer.weights.fragmentation == 1.0  # type: ignore[attr-defined]
    assert parse_weights("fragmentation=0.5").fragmentation == 0.5
    tuned = BrokerConfig(name="b", data_dir=Path("."), policy="fgd",
                         weights=parse_weights("fragmentation=0.5"))
    assert tuned.placement_policy().scorer.weights.fragmentation == 0.5  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="use utility, fgd, binpack, spread"):
        BrokerConfig(name="b", data_dir=Path("."),
                     policy="katamari").placement_policy()
