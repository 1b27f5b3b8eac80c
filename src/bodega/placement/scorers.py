"""Scoring a feasible worker: bodega's utility curves, and Nomad's bin-pack and spread.

Every scorer looks at the worker's utilization *after* placing the machine
and returns a score (higher is better) with its subscores, so an explanation
can show exactly why one worker beat another. The same adjustments apply to
every scorer, so policies can be compared on the same workload:

- ``image``:   + bonus when the worker already caches the machine's image
- ``app``:     - penalty per machine of the same app already there (spread an app)
- ``standby``: - penalty when the worker hosts a machine this one stands by for

The utility scorer can also weigh fragmentation (``fragmentation.py``,
weight ``fragmentation``, on in the ``fgd`` policy): - weight times the
scarce slots of bigger shapes the machine would take, measured against the
region's recent shape mix, so that the big shapes that arrive keep somewhere
to go; and keep a hole (``holes.py``, weight ``hole``, off by default): -
penalty times the share of the machine's cpus that would come out of the
region's largest free block.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import Protocol

import numpy as np
import numpy.typing as npt

from bodega.placement.candidate_table import CandidateTable, Floats
from bodega.placement.curves import BALANCED, ROOMY, Curve
from bodega.placement.fragmentation import holes_taken
from bodega.placement.holes import largest_hole_taken
from bodega.placement.request import Candidate, PlacementRequest

Subscores = dict[str, float]
Rows = npt.NDArray[np.int64]
Parts = dict[str, Floats]  # a subscore's column over some rows
# The parts listed only where they are not zero (the others always are, where they apply),
# in the order ``score`` adds them: a vector's sum then equals the scalar's, bit for bit.
ADJUSTMENTS = ("image", "app", "standby", "hole", "fragmentation")
FEW = 32  # below this many co-located workers, adjusting them one by one is cheaper


@dataclass(frozen=True)
class Weights:
    cpu: float = 1.0
    memory: float = 1.0
    disk: float = 0.5
    image: float = 0.1  # bonus for a cached image
    # penalty per co-located machine of the same app, up to 1. The curves', bin-pack's and
    # spread's scores all lie within 0 and 1, so at 1 the first machine there outweighs how
    # two workers' fills compare: an app's machines share a host only when no host without
    # one has room (a deploy's HA pair lands on two hosts); docs/scheduling.md
    app: float = 1.0
    standby: float = 1.0  # penalty for sharing a host with a machine we stand by for
    # utility only: penalty for taking from the region's largest free block of cpus. Off by
    # default: it cut the default trace's refusals but added some on others (scheduling.md).
    hole: float = 0.0
    # utility only: penalty per scarce slot of a bigger shape the machine would take, against
    # the region's recent shape mix (fragmentation.py). Off by default; on in the fgd policy.
    fragmentation: float = 0.0

    def with_overrides(self, overrides: dict[str, float]) -> Weights:
        """Apply API weights; ``spread`` (Fly's name) is bodega's ``app``."""
        known = {"cpu", "memory", "disk", "image", "app", "standby", "hole", "fragmentation"}
        values: dict[str, float] = {}
        for key, value in overrides.items():
            name = "app" if key == "spread" else key
            if name not in known:
                continue  # Fly's "region" weight has no meaning here: regions are asked for
            if value < 0:
                raise ValueError(f"weight {key} must not be negative")
            values[name] = float(value)
        return replace(self, **values)


def utilization(request: PlacementRequest, candidate: Candidate) -> tuple[float, float, float]:
    """(cpu, memory, disk) utilization of the worker once the machine is placed."""
    totals, used, ask = candidate.totals, candidate.used, request.ask
    need = totals.millicpus_for(ask)
    cpu = (used.millicpus + need) / totals.millicpus if totals.millicpus else 1.0
    mem = (used.memory_mb + ask.memory_mb) / totals.memory_mb if totals.memory_mb else 1.0
    disk = (used.disk_gb + ask.disk_gb) / totals.disk_gb if totals.disk_gb else 0.0
    return cpu, mem, disk


def utilizations(
    request: PlacementRequest, table: CandidateTable, rows: Rows
) -> tuple[Floats, Floats, Floats]:
    """``utilization`` for many rows of a table at once."""
    ask = request.ask
    if ask.cpu_kind == "performance":
        need = np.full(len(rows), ask.cpus * 1000.0)
    else:
        need = ask.cpus * table.column("shared_mcpu")[rows]
    cpu = _ratio(table.column("used_mcpu")[rows] + need, table.column("total_mcpu")[rows], 1.0)
    mem = _ratio(table.column("used_mem")[rows] + ask.memory_mb,
                 table.column("total_mem")[rows], 1.0)
    disk = _ratio(table.column("used_disk")[rows] + ask.disk_gb,
                  table.column("total_disk")[rows], 0.0)
    return cpu, mem, disk


def _ratio(num: Floats, den: Floats, when_zero: float) -> Floats:
    out = np.full(len(num), when_zero)
    np.divide(num, den, out=out, where=den > 0)
    return out


def adjustment_parts(
    request: PlacementRequest, table: CandidateTable, rows: Rows, weights: Weights
) -> Parts:
    """``adjustments`` for many rows at once, one column per kind that can apply."""
    parts: Parts = {}
    if request.image and weights.image:
        parts["image"] = np.where(table.image_mask(request.image)[rows], weights.image, 0.0)
    tracked = table.app_counts(request.app) if weights.app else None
    if tracked is not None:  # the table keeps this app's machines per worker itself
        parts["app"] = -np.minimum(1.0, tracked[rows] * weights.app)
    elif request.colocated and weights.app:
        app = np.zeros(len(rows))
        if len(request.colocated) > FEW:  # an app on many workers: one pass over the names
            names = table.names()
            counts = np.fromiter(map(request.colocated.get, names, repeat(0, len(names))),
                                 dtype=np.float64, count=len(names))
            app -= np.minimum(1.0, counts[rows] * weights.app)
        else:
            for name, count in request.colocated.items():
                _adjust_row(table, rows, app, name, -min(1.0, count * weights.app))
        parts["app"] = app
    if request.standby_workers and weights.standby:
        standby = np.zeros(len(rows))
        for name in request.standby_workers:
            _adjust_row(table, rows, standby, name, -weights.standby)
        parts["standby"] = standby
    return parts


def adjusted(score: Floats, parts: Parts) -> Floats:
    """``score`` plus the adjustments among ``parts``, summed as ``score`` sums them."""
    extra = np.zeros(len(score))
    for name in ADJUSTMENTS:
        if name in parts:
            extra = extra + parts[name]
    return score + extra


def subscores_at(parts: Parts, k: int) -> Subscores:
    """Row ``k``'s subscores as ``score`` lists them: a part that is NaN there is not one of
    them (no disk on that worker), and an adjustment is listed only where it is not zero."""
    out: Subscores = {}
    for name, column in parts.items():
        value = float(column[k])
        if value == value and (value or name not in ADJUSTMENTS):  # NaN != NaN
            out[name] = value
    return out


def _adjust_row(table: CandidateTable, rows: Rows, adj: Floats, name: str, delta: float) -> None:
    i = table.index(name)
    if i is not None:
        hits = np.flatnonzero(rows == i)
        if len(hits):
            adj[hits[0]] += delta


def adjustments(request: PlacementRequest, candidate: Candidate, weights: Weights) -> Subscores:
    out: Subscores = {}
    if request.image and weights.image and request.image in candidate.images:
        out["image"] = weights.image
    same_app = request.colocated.get(candidate.name, 0)
    if same_app and weights.app:
        out["app"] = -min(1.0, same_app * weights.app)
    if candidate.name in request.standby_workers and weights.standby:
        out["standby"] = -weights.standby
    return out


class Scorer(Protocol):
    @property
    def name(self) -> str: ...

    def score(self, request: PlacementRequest, candidate: Candidate,
              table: CandidateTable | None = None) -> tuple[float, Subscores]:
        """The worker's score and the parts it is made of; ``table`` is its region, for
        scorers that look beyond the one worker."""
        ...

    def breakdown(self, request: PlacementRequest, table: CandidateTable,
                  rows: Rows) -> tuple[Floats, Parts]:
        """The scores of many rows at once and the subscores they are made of
        (``subscores_at`` reads a row's out): equal to ``score`` row by row."""
        ...

    def reweighted(self, overrides: dict[str, float]) -> Scorer:
        """The same scorer with some weights replaced (ValueError on a bad one)."""
        ...


@dataclass(frozen=True)
class UtilityScorer:
    """bodega's default: weighted desirability curves over utilization after placing."""

    cpu: Curve = BALANCED
    memory: Curve = BALANCED
    disk: Curve = ROOMY
    weights: Weights = field(default_factory=Weights)
    name: str = "utility"

    def reweighted(self, overrides: dict[str, float]) -> Scorer:
        return replace(self, weights=self.weights.with_overrides(overrides))

    def score(self, request: PlacementRequest, candidate: Candidate,
              table: CandidateTable | None = None) -> tuple[float, Subscores]:
        w = self.weights
        u_cpu, u_mem, u_disk = utilization(request, candidate)
        subs: Subscores = {"cpu": self.cpu.at(u_cpu), "memory": self.memory.at(u_mem)}
        total_weight = w.cpu + w.memory
        base = w.cpu * subs["cpu"] + w.memory * subs["memory"]
        if candidate.totals.disk_gb and w.disk:
            subs["disk"] = self.disk.at(u_disk)
            base += w.disk * subs["disk"]
            total_weight += w.disk
        score = base / total_weight if total_weight else 0.0
        extra = adjustments(request, candidate, w)
        row = table.index(candidate.name) if table is not None else None
        if table is not None and row is not None:
            rows = np.array([row])
            taken = float(largest_hole_taken(request, table, rows)[0]) if w.hole else 0.0
            if taken:
                extra["hole"] = -w.hole * taken
            holes = float(holes_taken(request, table, rows)[0]) if w.fragmentation else 0.0
            if holes:
                extra["fragmentation"] = -w.fragmentation * holes
        subs.update(extra)
        return score + sum(extra.values()), subs

    def breakdown(self, request: PlacementRequest, table: CandidateTable,
                  rows: Rows) -> tuple[Floats, Parts]:
        w = self.weights
        u_cpu, u_mem, u_disk = utilizations(request, table, rows)
        xs_c, ys_c = zip(*self.cpu.points, strict=True)
        xs_m, ys_m = zip(*self.memory.points, strict=True)
        parts: Parts = {"cpu": np.interp(u_cpu, xs_c, ys_c),
                        "memory": np.interp(u_mem, xs_m, ys_m)}
        base = w.cpu * parts["cpu"] + w.memory * parts["memory"]
        total_weight = np.full(len(rows), w.cpu + w.memory)
        if w.disk:
            xs_d, ys_d = zip(*self.disk.points, strict=True)
            has_disk = table.column("total_disk")[rows] > 0
            disk = np.interp(u_disk, xs_d, ys_d)
            base += np.where(has_disk, w.disk * disk, 0.0)
            total_weight += np.where(has_disk, w.disk, 0.0)
            parts["disk"] = np.where(has_disk, disk, np.nan)
        score = _ratio(base, total_weight, 0.0)
        parts.update(adjustment_parts(request, table, rows, w))
        if w.hole:
            parts["hole"] = -w.hole * largest_hole_taken(request, table, rows)
        if w.fragmentation:
            parts["fragmentation"] = -w.fragmentation * holes_taken(request, table, rows)
        return adjusted(score, parts), parts


def _nomad_total(request: PlacementRequest, candidate: Candidate) -> float:
    u_cpu, u_mem, _ = utilization(request, candidate)
    free_cpu, free_mem = max(0.0, 1.0 - u_cpu), max(0.0, 1.0 - u_mem)
    return float(10**free_cpu + 10**free_mem)


def _nomad_totals(request: PlacementRequest, table: CandidateTable, rows: Rows) -> Floats:
    u_cpu, u_mem, _ = utilizations(request, table, rows)
    total: Floats = 10 ** np.maximum(0.0, 1.0 - u_cpu) + 10 ** np.maximum(0.0, 1.0 - u_mem)
    return total


@dataclass(frozen=True)
class BinPackScorer:
    """Nomad's ``ScoreFitBinPack``: clamp(20 - (10^freeCpu + 10^freeRam), 0, 18) / 18."""

    weights: Weights = field(default_factory=Weights)
    name: str = "binpack"

    def reweighted(self, overrides: dict[str, float]) -> Scorer:
        return replace(self, weights=self.weights.with_overrides(overrides))

    def score(self, request: PlacementRequest, candidate: Candidate,
              table: CandidateTable | None = None) -> tuple[float, Subscores]:
        fit = min(18.0, max(0.0, 20.0 - _nomad_total(request, candidate))) / 18.0
        subs: Subscores = {"binpack": fit, **adjustments(request, candidate, self.weights)}
        return fit + sum(v for k, v in subs.items() if k != "binpack"), subs

    def breakdown(self, request: PlacementRequest, table: CandidateTable,
                  rows: Rows) -> tuple[Floats, Parts]:
        fit = np.clip(20.0 - _nomad_totals(request, table, rows), 0.0, 18.0) / 18.0
        parts: Parts = {"binpack": fit, **adjustment_parts(request, table, rows, self.weights)}
        return adjusted(fit, parts), parts


@dataclass(frozen=True)
class SpreadScorer:
    """Nomad's spread, the mirror of bin-pack: clamp((10^freeCpu + 10^freeRam) - 2, 0, 18) / 18."""

    weights: Weights = field(default_factory=Weights)
    name: str = "spread"

    def reweighted(self, overrides: dict[str, float]) -> Scorer:
        return replace(self, weights=self.weights.with_overrides(overrides))

    def score(self, request: PlacementRequest, candidate: Candidate,
              table: CandidateTable | None = None) -> tuple[float, Subscores]:
        fit = min(18.0, max(0.0, _nomad_total(request, candidate) - 2.0)) / 18.0
        subs: Subscores = {"spread": fit, **adjustments(request, candidate, self.weights)}
        return fit + sum(v for k, v in subs.items() if k != "spread"), subs

    def breakdown(self, request: PlacementRequest, table: CandidateTable,
                  rows: Rows) -> tuple[Floats, Parts]:
        fit = np.clip(_nomad_totals(request, table, rows) - 2.0, 0.0, 18.0) / 18.0
        parts: Parts = {"spread": fit, **adjustment_parts(request, table, rows, self.weights)}
        return adjusted(fit, parts), parts
