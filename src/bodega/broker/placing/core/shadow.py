"""A second placement policy run in shadow: ranked on the same view, logged, never acted on.

For a sample of creates (``shadow_sample``, a fraction), the placer ranks
each region it tries with the shadow policy too, right after the live
ranking and over the same table, so both see the same workers in the same
state. When the placement ends, one log line (logger
``bodega.broker.placing.shadow``, ``placement shadow {json}``) carries both
decisions: the worker each would ask first, the top of each ranking with
every subscore, and where the machine actually landed. Nothing the shadow
decides reaches a worker, and it draws from its own random stream, so the
live policy places exactly as it would without it.

    {"app": ..., "asked": {...}, "placed": "ams-2" | null,
     "live": {"policy": "utility", "choice": "ams-2", "ranked": [...]},
     "shadow": {"policy": "binpack", "choice": "ams-1", "ranked": [...]},
     "agree": false}
"""

from __future__ import annotations

import json
import logging
import random
from typing import TypedDict

from bodega.broker.metrics import BrokerMetrics
from bodega.broker.placing.core.record import ranked
from bodega.model.capacity import AskWire
from bodega.placement import (
    CandidateTable,
    PlacementRequest,
    Policy,
    RegionRanking,
    rank_region,
)
from bodega.wire.public.placement import Winner

log = logging.getLogger("bodega.broker.placing.shadow")


class Shadow:
    def __init__(self, policy: Policy, sample: float, metrics: BrokerMetrics,
                 rng: random.Random | None = None) -> None:
        if not 0.0 <= sample <= 1.0:
            raise ValueError("the shadow sample is a fraction of creates, between 0 and 1")
        self.policy, self.sample, self.metrics = policy, sample, metrics
        self.rng = rng or random.Random()

    def wanted(self) -> bool:
        """Whether this create is one of the sample."""
        return self.sample >= 1.0 or self.rng.random() < self.sample

    def rank(self, request: PlacementRequest, table: CandidateTable,
             live: RegionRanking) -> RegionRanking:
        """The shadow's ranking of the table ``live`` was just ranked on. Both tops are
        scored now, before the create's claim changes the table."""
        live.top()
        ranking = rank_region(request, table, self.policy, self.rng)
        ranking.top()
        return ranking

    def report(self, request: PlacementRequest, live_policy: str, live: list[RegionRanking],
               shadow: list[RegionRanking], placed: str | None) -> ShadowEntry:
        """Log both decisions with their subscores; returns what was logged."""
        live_choice, shadow_choice = _choice(live), _choice(shadow)
        entry: ShadowEntry = {
            "app": request.app, "asked": request.ask.to_wire(),
            "regions": list(request.regions), "placed": placed,
            "live": {"policy": live_policy, "choice": live_choice, "ranked": _ranked(live)},
            "shadow": {"policy": self.policy.name, "choice": shadow_choice,
                       "ranked": _ranked(shadow)},
            "agree": live_choice == shadow_choice,
        }
        self.metrics.shadow_decisions.labels("agree" if entry["agree"] else "differ").inc()
        log.info("placement shadow %s", json.dumps(entry, sort_keys=True, default=_plain))
        return entry


class ShadowSide(TypedDict):
    """One policy's decision in a shadow entry."""

    policy: str
    choice: str | None  # the worker it would ask first; None: none of the regions has one
    ranked: list[Winner]  # with their subscores, written by ``_plain``


class ShadowEntry(TypedDict):
    """What the log line ``placement shadow {...}`` holds: both decisions, side by side."""

    app: str
    asked: AskWire
    regions: list[str]
    placed: str | None  # the worker the live policy's create landed on
    live: ShadowSide
    shadow: ShadowSide
    agree: bool


def _choice(rankings: list[RegionRanking]) -> str | None:
    """The worker a policy would ask first: the best of the first region with any."""
    for ranking in rankings:
        top = ranking.top(1)
        if top:
            return top[0].candidate.name
    return None


def _ranked(rankings: list[RegionRanking]) -> list[Winner]:
    return [ranked(scored) for ranking in rankings for scored in ranking.top()]


def _plain(model: Winner) -> object:
    """What ``json.dumps`` writes of a ranked worker in the log."""
    return model.model_dump(mode="json", exclude_none=True)
