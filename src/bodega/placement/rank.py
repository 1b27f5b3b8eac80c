"""The placement pipeline for one region: filter, (sample,) score, order the attempts.

    workers in region ──filters──▶ feasible ──scorer──▶ ranked, best first
                           │                    ▲
                           └ refused + reason   └ or power-of-d: score d random
                                                  untried workers per attempt

The broker walks ``RegionRanking.attempts()`` asking each worker for a
reservation until one says yes. Filters and scores run over the region's
``CandidateTable`` columns at once; a ``Scored`` with its subscores is built
only for the workers actually asked and for the top of an explanation, so
``explain()`` can say why the winner won without costing every placement a
thousand dictionaries. With sampling (Sparrow's power of two choices) each
attempt scores only ``d`` random untried workers.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice

import numpy as np
import numpy.typing as npt

from bodega.model.machine_config import ISOLATIONS
from bodega.placement.candidate_table import CandidateTable, Floats
from bodega.placement.filters import refusal
from bodega.placement.request import Candidate, PlacementRequest
from bodega.placement.scorers import Parts, Scorer, Subscores, UtilityScorer, subscores_at

Rows = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

EXPLAIN_RANKED = 10  # scored workers listed in an explanation
EXPLAIN_REFUSED = 20  # refusals listed by name (all are counted by kind)


@dataclass(frozen=True)
class Policy:
    scorer: Scorer = field(default_factory=UtilityScorer)
    sample: int = 0  # d in power-of-d choices; 0 scores every feasible worker
    sample_above: int = 32  # regions with fewer feasible workers are always fully ranked

    @property
    def name(self) -> str:
        return f"{self.scorer.name}+p{self.sample}c" if self.sample else self.scorer.name


@dataclass(frozen=True)
class Scored:
    candidate: Candidate
    score: float
    subscores: Subscores



class RegionRanking:
    """One region's verdict on a request: who was refused and why, who to ask first."""

    def __init__(self, request: PlacementRequest, table: CandidateTable, policy: Policy,
                 rng: random.Random) -> None:
        self.region = table.region
        self.considered = len(table)
        self._request, self._table, self._policy, self._rng = request, table, policy, rng
        checks = _checks(request, table)
        feasible, refused = _split(request, table, checks)
        self.feasible = len(feasible)
        self.refused_by_kind = _counts(len(table), checks)
        self.refusals = [(table.candidate(int(i)).name, refusal(request, table.candidate(int(i)))
                          or "") for i in refused[:EXPLAIN_REFUSED]]
        self.sampled = policy.sample if policy.sample and self.feasible > policy.sample_above else 0
        self._pool = feasible
        self._order: Rows = np.zeros(0, dtype=np.int64)
        # The scores and subscores of the ranked workers, best first: what ``attempts`` and
        # ``top`` hand out, as they were on the view the order was made on.
        self._scores: Floats = np.zeros(0)
        self._parts: Parts = {}
        if not self.sampled:
            scores, parts = policy.scorer.breakdown(request, table, feasible)
            # Best score first; ties broken by name so the same view always ranks the same way.
            by_rank = np.lexsort((table.name_order()[feasible], -scores))
            self._order = feasible[by_rank]
            self._scores = scores[by_rank]
            self._parts = {name: column[by_rank] for name, column in parts.items()}
        self.asked: list[Scored] = []  # every worker attempts() handed out, in order

    def _scored(self, row: int) -> Scored:
        candidate = self._table.candidate(row)
        score, subscores = self._policy.scorer.score(self._request, candidate, self._table)
        return Scored(candidate, score, subscores)

    def _ranked(self, k: int) -> Scored:
        """The ``k``-th best worker, with the score it was ranked by."""
        return Scored(self._table.candidate(int(self._order[k])), float(self._scores[k]),
                      subscores_at(self._parts, k))

    def attempts(self) -> Iterator[Scored]:
        """Workers to ask, in order; with sampling, ``d`` more are scored at each step."""
        if not self.sampled:
            for k in range(len(self._order)):
                scored = self._ranked(k)
                self.asked.append(scored)
                yield scored
            return
        pool = [int(i) for i in self._pool]
        while pool:
            picks = self._rng.sample(range(len(pool)), min(self.sampled, len(pool)))
            options = [self._scored(pool[i]) for i in picks]
            best = max(range(len(options)), key=lambda j: options[j].score)
            pool[picks[best]] = pool[-1]  # swap-remove the one we ask
            pool.pop()
            self.asked.append(options[best])
            yield options[best]

    def rounds(self, width: int = 1) -> Iterator[tuple[Scored, ...]]:
        """The placement's plan for this region: the rounds of asks, in order, each of
        ``width`` workers asked at once (two when hedging), the better first."""
        attempts = self.attempts()
        while batch := tuple(islice(attempts, width)):
            yield batch

    def top(self, count: int = EXPLAIN_RANKED) -> list[Scored]:
        """The best ``count`` by score (for sampling: the ones scored so far). Scored on the
        view the ranking was made on, though a claim may have changed the table since."""
        if self.sampled:
            return sorted(self.asked, key=lambda s: -s.score)[:count]
        return [self._ranked(k) for k in range(min(count, len(self._order)))]


def rank_region(
    request: PlacementRequest, table: CandidateTable, policy: Policy,
    rng: random.Random | None = None,
) -> RegionRanking:
    """Filter and rank the workers of one region for ``request``."""
    return RegionRanking(request, table, policy, rng or random.Random())


def rank_candidates(
    request: PlacementRequest, region: str, candidates: Sequence[Candidate], policy: Policy,
    rng: random.Random | None = None,
) -> RegionRanking:
    """``rank_region`` over a plain list (tests, one-off simulations)."""
    return rank_region(request, CandidateTable(region, candidates), policy, rng)


# -- filters over columns -----------------------------------------------------------------
def _cpu_need(request: PlacementRequest, table: CandidateTable) -> npt.NDArray[np.float64]:
    ask = request.ask
    if ask.cpu_kind == "performance":
        return np.full(len(table), ask.cpus * 1000.0)
    need: npt.NDArray[np.float64] = ask.cpus * table.column("shared_mcpu")
    return need


def _offers(table: CandidateTable, isolation: str) -> Mask:
    """The workers that ran ``isolation`` at their start (none, for a name none knows)."""
    if isolation not in ISOLATIONS:
        return np.zeros(len(table), dtype=np.bool_)
    return table.flag(f"{isolation}_ok")


def _checks(request: PlacementRequest, table: CandidateTable) -> list[tuple[str, Mask]]:
    """Each filter as (kind, refused mask), in ``filters.refusal``'s order."""
    ask = request.ask
    checks = [("not_alive", ~table.flag("alive")), ("cordoned", table.flag("cordoned"))]
    if request.pinned_worker is not None:
        pinned = np.zeros(len(table), dtype=np.bool_)
        i = table.index(request.pinned_worker)
        if i is not None:
            pinned[i] = True
        checks.append(("pinned", ~pinned))
    if request.avoid:
        avoided = np.zeros(len(table), dtype=np.bool_)
        for name in request.avoid:
            i = table.index(name)
            if i is not None:
                avoided[i] = True
        checks.append(("avoided", avoided))
    if request.needs_images:
        checks.append(("no_image_driver", ~table.flag("runs_images")))
    kind_ok = table.flag("performance_ok" if ask.cpu_kind == "performance" else "shared_ok")
    checks += [
        ("isolation", ~_offers(table, ask.isolation)),
        ("cpu_kind", ~kind_ok & (ask.cpus > 0)),
        ("cpu", _cpu_need(request, table) > table.column("total_mcpu") - table.column("used_mcpu")),
        ("memory", ask.memory_mb > table.column("total_mem") - table.column("used_mem")),
        ("disk", ask.disk_gb > table.column("total_disk") - table.column("used_disk")),
    ]
    return checks


def feasible_rows(request: PlacementRequest, table: CandidateTable) -> tuple[Rows, Rows]:
    """(feasible rows, refused rows): ``filters.refusal`` over every row at once."""
    return _split(request, table, _checks(request, table))


def refusal_counts(request: PlacementRequest, table: CandidateTable) -> dict[str, int]:
    """How many workers each filter refused, each counted at the first filter it failed."""
    return _counts(len(table), _checks(request, table))


def _split(request: PlacementRequest, table: CandidateTable,
           checks: list[tuple[str, Mask]]) -> tuple[Rows, Rows]:
    refused = np.zeros(len(table), dtype=np.bool_)
    for _kind, mask in checks:
        refused |= mask
    if request.ask.gpus:  # rare: let the exact check decide
        for i in np.flatnonzero(~refused):
            refused[i] = refusal(request, table.candidate(int(i))) is not None
    return np.flatnonzero(~refused).astype(np.int64), np.flatnonzero(refused).astype(np.int64)


def _counts(rows: int, checks: list[tuple[str, Mask]]) -> dict[str, int]:
    remaining = np.ones(rows, dtype=np.bool_)
    counts: dict[str, int] = {}
    for kind, mask in checks:
        hit = remaining & mask
        n = int(np.count_nonzero(hit))
        if n:
            counts[kind] = n
        remaining &= ~hit
    return counts


def best_free(candidates: Sequence[Candidate]) -> Candidate | None:
    """The live, uncordoned worker with the most free memory: what an error message reports."""
    live = [c for c in candidates if c.status == "alive" and not c.cordoned]
    if not live:
        return None
    return max(live, key=lambda c: (c.totals.memory_mb - c.used.memory_mb,
                                    c.totals.millicpus - c.used.millicpus))
