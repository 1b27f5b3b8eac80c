"""The machine screen's content, and the placement explanations, from the API's answers.

The machine screen shows what the public API answers for the machine (with
the caller's token): the machine with its events, and ``GET .../placement``,
the record of why it is where it is. The "where would this go" form shows
``POST /v1/platform/placements`` with ``explain``. These parse those answers
into values the templates only print. Pure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bodega.broker.ui.rows import CheckView

# The buttons a state offers, as the worker's state machine accepts them.
ACTIONS: dict[str, tuple[str, ...]] = {
    "created": ("start",),
    "started": ("stop", "restart", "suspend"),
    "stopped": ("start",),
    "suspended": ("start", "stop"),
    "failed": ("start",),
}
ACTION_NAMES = ("start", "stop", "restart", "suspend")


@dataclass(frozen=True)
class EventRow:
    type: str
    status: str
    source: str
    at: str


@dataclass(frozen=True)
class MachineDetail:
    id: str
    name: str
    app: str
    state: str
    region: str
    worker: str
    instance_id: str
    private_ip: str
    image: str
    created_at: str
    updated_at: str
    host_status: str
    config_json: str
    checks: tuple[CheckView, ...]
    events: tuple[EventRow, ...]

    @property
    def actions(self) -> tuple[str, ...]:
        return ACTIONS.get(self.state, ())


def when(milliseconds: int | float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(milliseconds / 1000)) + "Z"


def machine_detail(app: str, doc: Mapping[str, Any], worker: str) -> MachineDetail:
    config = doc.get("config") or doc.get("incomplete_config") or {}
    events = tuple(EventRow(str(e.get("type", "")), str(e.get("status", "")),
                            str(e.get("source", "")), when(int(e.get("timestamp") or 0)))
                   for e in doc.get("events") or () if isinstance(e, Mapping))
    checks = tuple(CheckView(str(c.get("name", "")), str(c.get("status", "")),
                             str(c.get("output", ""))[:500])
                   for c in doc.get("checks") or () if isinstance(c, Mapping))
    return MachineDetail(
        id=str(doc.get("id", "")), name=str(doc.get("name", "")), app=app,
        state=str(doc.get("state", "")), region=str(doc.get("region", "")), worker=worker,
        instance_id=str(doc.get("instance_id", "")), private_ip=str(doc.get("private_ip", "")),
        image=str(config.get("image", "")), created_at=str(doc.get("created_at", "")),
        updated_at=str(doc.get("updated_at", "")), host_status=str(doc.get("host_status", "")),
        config_json=json.dumps(config, indent=2, sort_keys=True), checks=checks, events=events)


@dataclass(frozen=True)
class ScoredRow:
    worker: str
    score: float
    subscores: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class RankingView:
    region: str
    candidates: int
    feasible: int
    refused: tuple[tuple[str, int], ...]
    refusals: tuple[tuple[str, str], ...]  # (worker, reason), the first twenty
    ranked: tuple[ScoredRow, ...]  # the top ten


@dataclass(frozen=True)
class AttemptRow:
    worker: str
    region: str
    outcome: str  # accepted, rejected, unreachable
    reason: str
    ms: float


@dataclass(frozen=True)
class PlacementView:
    policy: str
    asked: str
    at: str
    duration_ms: float
    regions: tuple[RankingView, ...]
    attempts: tuple[AttemptRow, ...]
    winner: str


def _scored(doc: Mapping[str, Any]) -> ScoredRow:
    subs = doc.get("subscores") or {}
    return ScoredRow(str(doc.get("worker", "")), float(doc.get("score") or 0),
                     tuple((str(k), float(v)) for k, v in subs.items()))


def ranking_view(doc: Mapping[str, Any]) -> RankingView:
    refused = doc.get("refused") or {}
    return RankingView(
        region=str(doc.get("region", "")), candidates=int(doc.get("candidates") or 0),
        feasible=int(doc.get("feasible") or 0),
        refused=tuple(sorted((str(k), int(v)) for k, v in refused.items())),
        refusals=tuple((str(r.get("worker", "")), str(r.get("reason", "")))
                       for r in doc.get("refusals") or () if isinstance(r, Mapping)),
        ranked=tuple(_scored(s) for s in doc.get("ranked") or () if isinstance(s, Mapping)))


def describe_ask(asked: Mapping[str, Any]) -> str:
    text = f"{asked.get('cpus', 0)} {asked.get('cpu_kind', 'shared')} cpu, " \
           f"{asked.get('memory_mb', 0)} MB"
    if asked.get("disk_gb"):
        text += f", {asked['disk_gb']} GB disk"
    return text


def placement_view(doc: Any) -> PlacementView | None:
    """``GET .../placement``'s record; None for anything else (a machine made before
    records were kept answers with no record)."""
    if not isinstance(doc, Mapping) or "regions" not in doc:
        return None
    try:
        winner = doc.get("winner") or {}
        return PlacementView(
            policy=str(doc.get("policy", "")), asked=describe_ask(doc.get("asked") or {}),
            at=str(doc.get("at", "")), duration_ms=float(doc.get("duration_ms") or 0),
            regions=tuple(ranking_view(r) for r in doc["regions"] if isinstance(r, Mapping)),
            attempts=tuple(AttemptRow(str(a.get("worker", "")), str(a.get("region", "")),
                                      str(a.get("outcome", "")), str(a.get("reason", "")),
                                      float(a.get("ms") or 0))
                           for a in doc.get("attempts") or () if isinstance(a, Mapping)),
            winner=str(winner.get("worker", "")))
    except (TypeError, ValueError, AttributeError):
        return None


@dataclass(frozen=True)
class RegionFit:
    region: str
    count: int
    hosts: int


@dataclass(frozen=True)
class WhereItGoes:
    """``POST /v1/platform/placements``'s answer: how many fit per region, and why."""

    fits: tuple[RegionFit, ...]
    explain: tuple[RankingView, ...]


def where_it_goes(doc: Mapping[str, Any]) -> WhereItGoes:
    return WhereItGoes(
        fits=tuple(RegionFit(str(r.get("region", "")), int(r.get("count") or 0),
                             int(r.get("concurrency") or 0))
                   for r in doc.get("regions") or () if isinstance(r, Mapping)),
        explain=tuple(ranking_view(r) for r in doc.get("explain") or ()
                      if isinstance(r, Mapping)))
