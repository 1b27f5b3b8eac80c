"""What a placement that found no room says: what was asked, how many workers were
considered and why they said no, what the best of them had free, and, for a region
whose workers all exist but none can take machines (dead, suspect, left or cordoned),
that plainly.
"""

from __future__ import annotations

from bodega.broker.placing.core.record import Record
from bodega.broker.view.candidates import Candidates
from bodega.model.capacity import describe_free
from bodega.model.errors import InsufficientCapacity
from bodega.model.plural import counted
from bodega.model.refusals import Unplaced
from bodega.model.rows.workers import DRAINING
from bodega.placement import PlacementRequest, best_free


def no_room(request: PlacementRequest, record: Record,
            candidates: Candidates) -> InsufficientCapacity:
    where = ",".join(request.regions) or "(no region)"
    considered = sum(r.considered for r in record.regions)
    parts = [f"insufficient capacity in {where}: asked for {request.ask.describe()}",
             f"{counted(considered, 'worker')} considered"]
    refused: dict[str, int] = {}
    for ranking in record.regions:
        for kind, count in ranking.refused_by_kind.items():
            refused[kind] = refused.get(kind, 0) + count
    rejected = sum(1 for a in record.attempts if a.outcome != "accepted")
    detail = [f"{n} {kind.replace('_', ' ')}" for kind, n in sorted(refused.items())]
    if rejected:
        detail.append(f"{rejected} said no when asked")
    if detail:
        parts[-1] += f" ({', '.join(detail)})"
    # An image machine that only workers running no images could have taken: say why they
    # run none (no OCI runtime, no cgroups), which no amount of room changes.
    imageless = next(((worker, reason.removeprefix("runs no images: "))
                      for ranking in record.regions for worker, reason in ranking.refusals
                      if reason.startswith("runs no images")), None)
    if imageless is not None:
        worker, why = imageless
        parts.append(f"an image machine needs a worker that runs images ({worker} runs none: "
                     f"{why})")
    # An isolation no worker there offers: no amount of room changes that either.
    isolation = request.ask.isolation
    offering = [c for c in candidates.all() if c.region in request.regions
                and isolation in c.totals.isolations]
    if not offering:
        parts.append(f"no worker in {where} offers isolation {isolation}")
    best = best_free([c for c in candidates.all() if c.region in request.regions])
    if best is not None:
        parts.append(f"the best ({best.name}) had {describe_free(best.totals, best.used)}")
    if considered == 0:
        parts.append("no worker serves " + where)
    parts += [down for region in request.regions
              if (down := none_usable(candidates, region)) is not None]
    return InsufficientCapacity("; ".join(parts),
                                details=Unplaced(placement=record.answer().doc()))


def none_usable(candidates: Candidates, region: str) -> str | None:
    """Says so when a region has workers but none that could take a machine at all."""
    workers = list(candidates.table(region))
    if not workers or any(w.status == "alive" and not w.cordoned for w in workers):
        return None
    states: dict[str, int] = {}
    for worker in workers:
        state = worker.status if worker.status != "alive" else \
            "draining" if worker.cordon_reason == DRAINING else "cordoned"
        states[state] = states.get(state, 0) + 1
    return (f"no worker in {region} can take machines now: "
            + ", ".join(f"{n} {state}" for state, n in sorted(states.items())))
