"""What a placement decided, kept for ``GET .../placement`` and ``--explain``.

A ``Record`` holds the policy, what was asked, each region's ranking (every
candidate with its subscores, every refusal with its reason), each attempt on
a worker and its outcome, and the winner. The winning worker keeps it with
the machine, so "why is it there?" always has an answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bodega.model.machine import rfc3339
from bodega.placement import RegionRanking, Scored


@dataclass
class Attempt:
    worker: str
    region: str
    outcome: str  # accepted, rejected, unreachable
    reason: str = ""
    ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"worker": self.worker, "region": self.region,
                               "outcome": self.outcome}
        if self.ms:  # an attempt still in flight (the record a worker keeps) has no time yet
            out["ms"] = round(self.ms, 2)
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class Record:
    """Everything a placement decided, for ``GET .../placement`` and ``--explain``."""

    policy: str
    asked: dict[str, Any]
    regions_asked: tuple[str, ...]
    broker: str
    regions: list[RegionRanking] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    winner: Scored | None = None
    started: float = field(default_factory=time.time)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policy": self.policy, "asked": self.asked, "regions_asked": list(self.regions_asked),
            "broker": self.broker, "at": rfc3339(self.started),
            # Until the placement ends (the record sent with the create), the time so far.
            "duration_ms": round((self.seconds or time.time() - self.started) * 1000, 3),
            "regions": [r.explain() for r in self.regions],
            "attempts": [a.to_json() for a in self.attempts],
        }
        if self.winner is not None:
            out["winner"] = {**self.winner.to_json(), "region": self.winner.candidate.region}
        return out
