"""Keeping a hole: the share of a machine's cpus taken from the region's largest free block."""

from __future__ import annotations

import numpy as np
import pytest

from bodega.model.capacity import Ask, Totals, Usage
from bodega.placement import (
    Candidate,
    CandidateTable,
    PlacementRequest,
    Policy,
    UtilityScorer,
    Weights,
    rank_candidates,
)
from bodega.placement.holes import largest_hole_taken


def host(name: str, cpus: int, used_mcpu: int, *, status: str = "alive",
         kinds: tuple[str, ...] = ("shared", "performance")) -> Candidate:
    # Memory is plentiful everywhere so that only cpus decide.
    return Candidate(name, "ams", f"http://{name}",
                     Totals(cpus=cpus, memory_mb=256 * 1024, disk_gb=100, cpu_kinds=kinds),
                     Usage(millicpus=used_mcpu, memory_mb=cpus * 1024), status=status)


def ask(kind: str = "shared", cpus: int = 1) -> PlacementRequest:
    return PlacementRequest(app="web", ask=Ask(cpu_kind=kind, cpus=cpus, memory_mb=256),
                            regions=("ams",))


def taken(request: PlacementRequest, hosts: list[Candidate]) -> dict[str, float]:
    table = CandidateTable("ams", hosts)
    rows = np.arange(len(table), dtype=np.int64)
    return dict(zip(table.names(), largest_hole_taken(request, table, rows).tolist(),
                    strict=True))


def test_only_the_host_holding_the_largest_block_is_charged() -> None:
    hosts = [host("big", 64, 24_000), host("mid", 32, 24_000), host("small", 8, 2_000)]
    # big has 40 cpus free, mid 8, small 6: a shared cpu (250 mcpu) comes out of big's 40.
    assert taken(ask(), hosts) == {"big": 1.0, "mid": 0.0, "small": 0.0}


def test_a_tie_for_the_largest_block_leaves_one_whole_either_way() -> None:
    hosts = [host("a", 32, 8_000), host("b", 32, 8_000), host("c", 8, 0)]
    assert taken(ask("performance", 8), hosts) == {"a": 0.0, "b": 0.0, "c": 0.0}


def test_a_machine_bigger_than_the_gap_to_the_second_block_is_charged_the_gap() -> None:
    # a has 10 cpus free, b 8: a performance-4x on a leaves 6, so the largest falls 10 -> 8.
    hosts = [host("a", 16, 6_000), host("b", 16, 8_000)]
    assert taken(ask("performance", 4), hosts) == {"a": pytest.approx(0.5), "b": 0.0}


def test_dead_and_shared_only_hosts_hold_no_hole() -> None:
    hosts = [host("dead", 64, 0, status="dead"), host("shared", 64, 0, kinds=("shared",)),
             host("a", 16, 0), host("b", 16, 4_000)]
    assert taken(ask(), hosts) == {"dead": 0.0, "shared": 0.0, "a": 1.0, "b": 0.0}


def test_a_full_region_charges_nobody() -> None:
    assert taken(ask(), [host("a", 8, 8_000), host("b", 8, 8_000)]) == {"a": 0.0, "b": 0.0}


def test_the_hole_weight_sends_a_small_machine_away_from_the_largest_block() -> None:
    # big ends 40 % used (the curve's best), mid 84 %: the curves alone pick big.
    hosts = [host("big", 32, 12_500), host("mid", 16, 13_200)]
    plain = rank_candidates(ask(), "ams", hosts, Policy())
    assert [s.candidate.name for s in plain.attempts()] == ["big", "mid"]
    keeping = rank_candidates(ask(), "ams", hosts,
                              Policy(UtilityScorer(weights=Weights(hole=1.0))))
    assert [s.candidate.name for s in keeping.attempts()] == ["mid", "big"]
    ranked = {s.candidate.name: s for s in keeping.top()}
    assert ranked["big"].subscores["hole"] == -1.0  # named in the explanation
    assert "hole" not in ranked["mid"].subscores


def test_the_hole_weight_is_off_by_default_and_set_by_name() -> None:
    assert Weights().hole == 0.0
    assert Weights().with_overrides({"hole": 2}).hole == 2.0
    with pytest.raises(ValueError, match="hole"):
        Weights().with_overrides({"hole": -1})


def test_the_broker_command_line_takes_the_hole_weight() -> None:
    from bodega.cli.daemons.broker import parse_weights

    assert parse_weights("cpu=1,hole=1.5").hole == 1.5
    with pytest.raises(ValueError, match="unknown weight 'holes'"):
        parse_weights("holes=1")
