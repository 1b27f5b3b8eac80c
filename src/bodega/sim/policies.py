"""The policies a simulation compares, by name, built from bodega's own placement code.

    default      whatever the broker runs when told nothing (``placement.DEFAULT_POLICY``)
    fgd          bodega's curves plus the fragmentation gradient against the recent
                 shape mix (``placement/fragmentation.py``)
    utility      bodega's curves alone (the default before ``fgd``)
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
                 the default policy: the reference a distributed system can approach

Any of them can take weights in brackets, ``fgd[fragmentation=2;app=0.5]``
(``;`` between them), to try a variant by name from the command line.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, fields, replace

import numpy as np
import numpy.typing as npt

from bodega.placement import (
    Candidate,
    CandidateTable,
    PlacementRequest,
    Policy,
    Scorer,
    SpreadScorer,
    UtilityScorer,
    Weights,
)
from bodega.placement.candidate_table import Floats
from bodega.placement.named import DEFAULT_POLICY, scorer_named
from bodega.placement.scorers import Parts, Subscores

Rows = npt.NDArray[np.int64]

KEEP_A_HOLE = 1.0  # the hole weight of the ``hole`` policy: the curves' whole range

DEFAULT_POLICIES = ("default", "fgd", "binpack", "spread", "pow-2", "random", "omniscient")


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

    def breakdown(self, request: PlacementRequest, table: CandidateTable,
                  rows: Rows) -> tuple[Floats, Parts]:
        values = np.array([self.rng.random() for _ in range(len(rows))], dtype=np.float64)
        return values, {"random": values}


@dataclass(frozen=True)
class SimPolicy:
    name: str
    policy: Policy
    omniscient: bool = False  # one allocator that always sees the truth


def _scorer(base: str, seed: int, utility: UtilityScorer | None) -> Scorer:
    if base == "random":
        return RandomScorer(random.Random(seed))
    if base in ("utility", "fgd") and utility is not None:  # the caller's curves
        named = scorer_named(base, utility.weights, utility.cpu, utility.memory, utility.disk)
        return named
    try:
        return scorer_named(base)
    except ValueError:
        raise ValueError(f"unknown policy {base!r}: use default, fgd, utility, hole, binpack, "
                         "spread, random, pow-D, S+pD or omniscient") from None


def _choices(text: str, name: str) -> int:
    try:
        d = int(text)
    except ValueError:
        raise ValueError(f"policy {name!r}: the number of choices must be a whole number") from None
    if d < 1:
        raise ValueError(f"policy {name!r}: the number of choices must be at least 1")
    return d


def _weights(text: str, name: str) -> dict[str, float]:
    """``fragmentation=2;app=0.5`` -> {"fragmentation": 2.0, "app": 0.5}."""
    out: dict[str, float] = {}
    known = {f.name for f in fields(Weights)}
    for part in text.split(";"):
        key, sep, value = part.strip().partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise ValueError(f"policy {name!r}: weights in brackets are name=number pairs "
                             "separated by ';'") from None
        if key.strip() not in known:
            raise ValueError(f"policy {name!r}: unknown weight {key.strip()!r}; use "
                             + ", ".join(sorted(known)))
    return out


def named(name: str, seed: int = 0, utility: UtilityScorer | None = None) -> SimPolicy:
    """The policy called ``name``; ``utility`` replaces the default curves where they apply."""
    text = name.strip().lower()
    base, bracket, rest = text.partition("[")
    overrides: dict[str, float] = {}
    if bracket:
        if not rest.endswith("]"):
            raise ValueError(f"policy {name!r}: a bracket of weights must close with ']'")
        overrides = _weights(rest[:-1], name)
    policy = _named(base, seed, utility)
    if overrides:
        try:
            scorer = policy.policy.scorer.reweighted(overrides)
        except ValueError as err:
            raise ValueError(f"policy {name!r}: {err}") from None
        policy = replace(policy, policy=replace(policy.policy, scorer=scorer), name=text)
    return policy


def _named(text: str, seed: int, utility: UtilityScorer | None) -> SimPolicy:
    if text == "default":
        return replace(_named(DEFAULT_POLICY, seed, utility), name=f"default ({DEFAULT_POLICY})")
    if text == "omniscient":
        return SimPolicy(text, Policy(_scorer(DEFAULT_POLICY, seed, utility)), omniscient=True)
    if text == "hole":
        curves = utility or UtilityScorer()
        return SimPolicy(text, Policy(replace(curves, weights=replace(curves.weights,
                                                                      hole=KEEP_A_HOLE))))
    if text.startswith("pow-"):
        d = _choices(text[4:], text)
        return SimPolicy(text, Policy(SpreadScorer(), sample=d, sample_above=0))
    base, plus, sample = text.partition("+p")
    scorer = _scorer(base, seed, utility)
    if not plus:
        return SimPolicy(text, Policy(scorer))
    return SimPolicy(text, Policy(scorer, sample=_choices(sample, text)))


def with_seed(policy: SimPolicy, seed: int) -> SimPolicy:
    """The same policy with its own random stream (one per broker)."""
    scorer = policy.policy.scorer
    if isinstance(scorer, RandomScorer):
        return replace(policy, policy=replace(policy.policy,
                                              scorer=RandomScorer(random.Random(seed))))
    return policy
