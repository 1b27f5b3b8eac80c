"""Keeping a hole: how much of a region's largest free block of cpus a placement would take.

Curves over *relative* utilization fill big and small hosts alike, so at a
busy hour every host can sit at 80 % with no host left with 8 whole cpus
free: a performance-8x is refused though the region has dozens of free cpus
in crumbs. The ``hole`` subscore sees the absolute room: of the cpus this
machine needs, the share that would come out of the region's largest free
block (the most free millicpus on any live, uncordoned worker that can run
dedicated cpus), after placing it::

    largest before = max(free)
    largest after  = max(free on this worker - need, max(free on every other worker))
    taken          = (largest before - largest after) / need        in [0, 1]

``taken`` is 0 on every worker but the one holding the largest block (and 0
there too when another worker ties it), 1 when the machine would come
entirely out of that block. A scorer subtracts ``weight * taken``: the
biggest hole is the last place for a small machine, while a machine that
fits elsewhere leaves it for the one that fits nowhere else. There is no
size threshold: whatever the region's biggest hole is, it is kept.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bodega.placement.candidate_table import CandidateTable, Floats
from bodega.placement.request import PlacementRequest

Rows = npt.NDArray[np.int64]


def cpu_need(request: PlacementRequest, table: CandidateTable, rows: Rows) -> Floats:
    """Millicpus the machine takes on each row (shared cpus count by the worker's ratio)."""
    ask = request.ask
    if ask.cpu_kind == "performance":
        return np.full(len(rows), ask.cpus * 1000.0)
    need: Floats = ask.cpus * table.column("shared_mcpu")[rows]
    return need


def largest_hole_taken(request: PlacementRequest, table: CandidateTable, rows: Rows) -> Floats:
    """For each row, the share of the machine's cpus taken from the region's largest hole."""
    taken = np.zeros(len(rows))
    if not len(rows) or not len(table):
        return taken
    usable = (table.flag("alive") & ~table.flag("cordoned") & table.flag("performance_ok"))
    free = np.where(usable, table.column("total_mcpu") - table.column("used_mcpu"), 0.0)
    free = np.maximum(free, 0.0)
    largest = float(free.max())
    if largest <= 0.0:
        return taken
    holders = int(np.count_nonzero(free == largest))
    second = largest
    if holders == 1:
        second = float(np.partition(free, -2)[-2]) if len(free) > 1 else 0.0
    need = cpu_need(request, table, rows)
    mine = free[rows]
    # The best block left elsewhere: the second largest if this row alone holds the largest.
    elsewhere = np.where((mine == largest) & (holders == 1), second, largest)
    after = np.maximum(np.where(usable[rows], mine - need, mine), elsewhere)
    np.divide(largest - after, need, out=taken, where=need > 0)
    return np.clip(taken, 0.0, 1.0)

