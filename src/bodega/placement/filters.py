"""Feasibility: which candidates could take the machine at all, and why the others cannot.

Filters run in a fixed order, cheapest and most decisive first; the first
that refuses names the reason recorded for that worker:

1. liveness   - a suspect or dead worker would not answer (or would, too late)
2. cordon     - the operator asked for no new machines there ("draining" while a drain
                moves the host's machines off)
3. pinning    - a machine that mounts a volume must run on the volume's host
4. avoidance  - hosts the request rules out (a volume name already on the host)
5. images     - an image machine needs a worker that runs images (one with the process
                driver only says why it does not: no OCI runtime, no cgroups)
6. capacity   - isolation (those the worker ran at its start), cpu kind, cpus, memory,
                gpus, disk, as the worker's ledger counts them
"""

from __future__ import annotations

from bodega.model.capacity import shortfalls
from bodega.model.rows.workers import DRAINING
from bodega.placement.request import Candidate, PlacementRequest


def refusal(request: PlacementRequest, candidate: Candidate) -> str | None:
    """Why ``candidate`` cannot take the request, or None if it is feasible."""
    if candidate.status != "alive":
        return f"worker is {candidate.status}"
    if candidate.cordoned:
        return DRAINING if candidate.cordon_reason == DRAINING else "cordoned"
    if request.pinned_worker is not None and candidate.name != request.pinned_worker:
        return request.pinned_reason or f"pinned to {request.pinned_worker}"
    if candidate.name in request.avoid:
        return request.avoid_reason
    if request.needs_images and candidate.images_off:
        return f"runs no images: {candidate.images_off}"
    reasons = shortfalls(candidate.totals, candidate.used, request.ask)
    if reasons:
        return "; ".join(reasons)
    return None

