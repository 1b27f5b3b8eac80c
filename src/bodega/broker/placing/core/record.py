"""What a placement decided, kept for ``GET .../placement`` and ``--explain``.

A ``Record`` holds the policy, what was asked, each region's ranking (every
candidate with its subscores, every refusal with its reason), each attempt on
a worker and its outcome, and the winner. The winning worker keeps it with
the machine, so "why is it there?" always has an answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bodega.model.capacity import Ask
from bodega.model.machine import rfc3339
from bodega.placement import RegionRanking, Scored
from bodega.wire.public.placement import (
    Asked,
    PlacementAttempt,
    PlacementRecord,
    Refusal,
    RegionExplanation,
    Winner,
)


def ranked(scored: Scored) -> Winner:
    """One ranked worker as an explanation lists it, with its region."""
    return Winner(worker=scored.candidate.name, score=round(scored.score, 4),
                  subscores={k: round(v, 4) for k, v in scored.subscores.items()},
                  region=scored.candidate.region)


def explained(ranking: RegionRanking) -> RegionExplanation:
    """A region's verdict on a request (``placement/rank.py``), as the record keeps it: who
    was considered and refused (by kind, the first few by name), and the top few ranked."""
    return RegionExplanation(
        region=ranking.region, candidates=ranking.considered, feasible=ranking.feasible,
        refused=dict(ranking.refused_by_kind),
        refusals=[Refusal(worker=worker, reason=reason) for worker, reason in ranking.refusals],
        ranked=[ranked(scored) for scored in ranking.top()],
        sampled=ranking.sampled or None)


@dataclass
class Attempt:
    worker: str
    region: str
    outcome: str  # accepted, rejected, unreachable
    reason: str = ""
    ms: float = 0.0


@dataclass
class Record:
    """Everything a placement decided, for ``GET .../placement`` and ``--explain``."""

    policy: str
    asked: Ask
    regions_asked: tuple[str, ...]
    broker: str
    regions: list[RegionRanking] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    winner: Scored | None = None
    started: float = field(default_factory=time.time)
    seconds: float = 0.0

    def answer(self) -> PlacementRecord:
        """The record as it travels and is kept (``wire/public/placement.py``): one model from here
        to the worker's store and ``bodega machine explain``."""
        return PlacementRecord(
            policy=self.policy, asked=Asked.model_validate(self.asked.to_wire()),
            regions_asked=list(self.regions_asked), broker=self.broker,
            at=rfc3339(self.started),
            # Until the placement ends (the record sent with the create), the time so far.
            duration_ms=round((self.seconds or time.time() - self.started) * 1000, 3),
            regions=[explained(r) for r in self.regions],
            attempts=[PlacementAttempt(worker=a.worker, region=a.region, outcome=a.outcome,
                                       ms=round(a.ms, 2) if a.ms else None,
                                       reason=a.reason or None)
                      for a in self.attempts],
            winner=ranked(self.winner) if self.winner is not None else None)
