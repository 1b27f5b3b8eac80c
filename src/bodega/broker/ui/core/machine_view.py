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
from dataclasses import dataclass

from bodega.broker.ui.core.rows import CheckView
from bodega.model.machine import Machine
from bodega.wire.public.placement import Asked, PlacementRecord, Ranked, RegionExplanation
from bodega.wire.public.platform import Placements

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


def machine_detail(app: str, machine: Machine, worker: str) -> MachineDetail:
    config = machine.known_config()
    events = tuple(EventRow(e.type, e.status, e.source, when(e.timestamp))
                   for e in machine.events or ())
    checks = tuple(CheckView(c.name, c.status, c.output[:500]) for c in machine.checks or ())
    return MachineDetail(
        id=machine.id, name=machine.name, app=app, state=machine.state, region=machine.region,
        worker=worker, instance_id=machine.instance_id, private_ip=machine.private_ip,
        image=config.image if config is not None else "", created_at=machine.created_at,
        updated_at=machine.updated_at, host_status=machine.host_status or "",
        config_json=json.dumps(config.to_wire() if config is not None else {}, indent=2,
                               sort_keys=True),
        checks=checks, events=events)


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


def _scored(ranked: Ranked) -> ScoredRow:
    return ScoredRow(ranked.worker, ranked.score, tuple(ranked.subscores.items()))


def ranking_view(region: RegionExplanation) -> RankingView:
    return RankingView(
        region=region.region, candidates=region.candidates, feasible=region.feasible,
        refused=tuple(sorted(region.refused.items())),
        refusals=tuple((r.worker, r.reason) for r in region.refusals),
        ranked=tuple(_scored(s) for s in region.ranked))


def describe_ask(asked: Asked) -> str:
    text = f"{asked.cpus} {asked.cpu_kind} cpu, {asked.memory_mb} MB"
    if asked.disk_gb:
        text += f", {asked.disk_gb} GB disk"
    return text


def placement_view(record: PlacementRecord) -> PlacementView:
    """``GET .../placement``'s record."""
    return PlacementView(
        policy=record.policy, asked=describe_ask(record.asked), at=record.at,
        duration_ms=record.duration_ms, regions=tuple(ranking_view(r) for r in record.regions),
        attempts=tuple(AttemptRow(a.worker, a.region, a.outcome, a.reason or "", a.ms or 0.0)
                       for a in record.attempts),
        winner=record.winner.worker if record.winner is not None else "")


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


def where_it_goes(answer: Placements) -> WhereItGoes:
    return WhereItGoes(
        fits=tuple(RegionFit(r.region, r.count, r.concurrency) for r in answer.regions),
        explain=tuple(ranking_view(r) for r in answer.explain or ()))
