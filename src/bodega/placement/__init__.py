"""bodega.placement: pure ranking of workers for a machine, with reasons.

``rank_region(request, region, candidates, policy)`` filters the region's
workers (liveness, cordon, volume pinning, capacity), scores the feasible
ones with the policy's scorer (utility curves, Nomad bin-pack or spread;
optionally power-of-d sampling) and returns the attempts in order, with an
explanation of every refusal and score.
"""

from bodega.placement.candidate_table import CandidateTable
from bodega.placement.curves import Curve
from bodega.placement.rank import (
    Policy,
    RegionRanking,
    Scored,
    best_free,
    rank_candidates,
    rank_region,
)
from bodega.placement.request import Candidate, PlacementRequest
from bodega.placement.scorers import (
    BinPackScorer,
    Scorer,
    SpreadScorer,
    UtilityScorer,
    Weights,
)

__all__ = [
    "BinPackScorer",
    "Candidate",
    "CandidateTable",
    "Curve",
    "PlacementRequest",
    "Policy",
    "RegionRanking",
    "Scored",
    "Scorer",
    "SpreadScorer",
    "UtilityScorer",
    "Weights",
    "best_free",
    "rank_candidates",
    "rank_region",
]
