"""Suspicion timers and local health: the two Lifeguard mechanisms with state.

A suspicion starts at ``Max`` and shortens as independent members confirm it
(LHA-Suspicion): one slow detector alone needs the whole ``Max`` to kill a
member, while several agreeing detectors bring it down to ``Min``::

    timeout(C) = max(Min, Max - (Max - Min)·log(C+1)/log(K+1))
    Min = SuspicionMult·max(1, log10 n)·ProbeInterval,   Max = MaxTimeoutMult·Min
    K   = SuspicionMult - 2   (0 when fewer than K other members could confirm)

Local health (LHA-Probe) is a saturating counter: failed probes, missed
nacks, refuting a suspicion about ourselves and a lagging event loop raise
it, successful probes lower it; probe interval and timeout are multiplied by
``score + 1``, so a node that is itself the slow party backs off instead of
accusing healthy members.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from bodega.registry.membership.core.config import SwimConfig


def suspicion_min(config: SwimConfig, n: int) -> float:
    return config.suspicion_mult * max(1.0, math.log10(max(n, 1))) * config.probe_interval


def suspicion_max(config: SwimConfig, n: int) -> float:
    return config.suspicion_max_timeout_mult * suspicion_min(config, n)


def suspicion_timeout(min_t: float, max_t: float, k: int, confirmations: int) -> float:
    if k < 1:
        return min_t
    frac = math.log(confirmations + 1) / math.log(k + 1)
    return max(min_t, max_t - (max_t - min_t) * frac)


@dataclass
class Suspicion:
    """One member's suspicion as this node times it."""

    started: float
    min_timeout: float
    max_timeout: float
    k: int
    incarnation: int
    confirmers: set[str] = field(default_factory=set)  # includes whoever raised it

    @classmethod
    def start(cls, config: SwimConfig, now: float, n: int, incarnation: int,
              by: str) -> Suspicion:
        k = config.suspicion_mult - 2
        if n - 2 < k:  # the suspect and we cannot confirm: expect nobody
            k = 0
        min_t = suspicion_min(config, n)
        return cls(now, min_t, config.suspicion_max_timeout_mult * min_t, k, incarnation, {by})

    @property
    def confirmations(self) -> int:
        return len(self.confirmers) - 1

    def confirm(self, by: str) -> bool:
        """Count an independent confirmation; False if ``by`` already counted or none needed."""
        if self.confirmations >= self.k or by in self.confirmers:
            return False
        self.confirmers.add(by)
        return True

    @property
    def deadline(self) -> float:
        timeout = suspicion_timeout(self.min_timeout, self.max_timeout, self.k,
                                    self.confirmations)
        return self.started + timeout


class LocalHealth:
    """Lifeguard's local health multiplier: a score in [0, max_score]."""

    def __init__(self, max_score: int) -> None:
        self.max_score = max_score
        self.score = 0

    def apply(self, delta: int) -> None:
        self.score = min(self.max_score, max(0, self.score + delta))

    def scale(self, timeout: float) -> float:
        return timeout * (self.score + 1)
