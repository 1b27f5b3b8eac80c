"""The policies a simulation compares, by name, built from bodega's own placement code.

    utility      bodega's default: desirability curves (the broker's default policy)
    hole         the same curves with the ``hole`` weight at 1: each machine avoids
                 taking from its region's largest free block of cpus
    binpack      Nomad's ScoreFitBinPack
    spread       Nomad's spread (the mirror of bin-pack)
    pow-D        Sparrow's power of D choices: the least loaded of D random workers
                 (spread's score over a sample of D, sampled at every region size)
    S+pD         scorer S (utility, binpack, spread) over a sample of D, as ``--sample``
                 runs it in the broker (regions under 32 feasible workers fully ranked)
    random       any feasible worker, uniformly
    omniscient   a single central allocator with a consistent view, scoring with
                 bodega's curves: the reference a distributed system can approach
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from bodega.placement import (
    BinPackScorer,
    Candidate,
    CandidateTable,
    PlacementRequest,
    Policy,
    Scorer,
    SpreadScorer,
    UtilityScorer,
)
from bodega.placement.candidate_table import Floats
from bodega.placement.scorers import Subscores

Rows = npt.NDArray[np.int64]

KEEP_A_HOLE = 1.0  # the hole weight of the ``hole`` policy: the curves' whole range

DEFAULT_POLICIES = ("utility", "hole", "binpack", "spread", "pow-2", "random", "omniscient")


@dataclass(frozen=True)
class RandomScorer:
    """A uniformly random score: placement with no information but feasibility."""

    rng: random.Random = field(default_factory=random.Random, compare=False)
    name: str = "random"

    def reweighted(self, overrides: dict[str, float]) -> Scorer:
        return self

    def score(self, request: PlacementRequest, candidate: Candidate,
              table: CandidateTable | None = None) -> tuple[float, Subscores]:
        value = self.rng.random()
        return value, {"random": value}

    def scores(self, request: PlacementRequest, table: CandidateTable, rows: Rows) -> Floats:
        return np.array([self.rng.random() for _ in range(len(rows))], dtype=np.float64)


@dataclass(frozen=True)
class SimPolicy:
    name: str
    policy: Policy
    omniscient: bool = False  # one allocator that always sees the truth


def _scorer(base: str, seed: int) -> Scorer:
    if base == "utility":
        return UtilityScorer()
    if base == "binpack":
        return BinPackScorer()
    if base == "spread":
        return SpreadScorer()
    if base == "random":
        return RandomScorer(random.Random(seed))
    raise ValueError(f"unknown policy {base!r}: use utility, hole, binpack, spread, random, "
                     "pow-D, S+pD or omniscient")


def _choices(text: str, name: str) -> int:
    try:
        d = int(text)
    except ValueError:
        raise ValueError(f"policy {name!r}: the number of choices must be a whole number") from None
    if d < 1:
        raise ValueError(f"policy {name!r}: the number of choices must be at least 1")
    return d


def named(name: str, seed: int = 0, utility: UtilityScorer | None = None) -> SimPolicy:
    """The policy called ``name``; ``utility`` replaces the default curves where they apply."""
    text = name.strip().lower()
    default = utility or UtilityScorer()
    if text == "omniscient":
        return SimPolicy(text, Policy(default), omniscient=True)
    if text == "hole":
        return SimPolicy(text, Policy(replace(default, weights=replace(default.weights,
                                                                       hole=KEEP_A_HOLE))))
    if text.startswith("pow-"):
        d = _choices(text[4:], name)
        return SimPolicy(text, Policy(SpreadScorer(), sample=d, sample_above=0))
    base, plus, sample = text.partition("+p")
    scorer = default if base == "utility" else _scorer(base, seed)
    if not plus:
        return SimPolicy(text, Policy(scorer))
    return SimPolicy(text, Policy(scorer, sample=_choices(sample, name)))


def with_seed(policy: SimPolicy, seed: int) -> SimPolicy:
    """The same policy with its own random stream (one per broker)."""
    scorer = policy.policy.scorer
    if isinstance(scorer, RandomScorer):
        return replace(policy, policy=replace(policy.policy,
                                              scorer=RandomScorer(random.Random(seed))))
    return policy
