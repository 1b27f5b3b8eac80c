"""Fragmentation against the shapes that arrive: the holes a placement would take from the
bigger machines the region is asked for (after Weng et al., "Fragmentation Gradient
Descent", USENIX ATC '23, with cpus and memory in place of GPUs).

Free cpus are only as good as the machines that fit in them: eight free cpus
on eight hosts take no performance-8x, one host with eight does. For each
shape ``m`` in the region's recent mix (``ShapeMix``: share ``p_m`` of the
last creates), a host has ``slots_m`` = how many ``m`` fit in its free cpus
and memory (dedicated cpus only where it offers them), and the region
``N_m`` = the sum over live, uncordoned hosts. Over the next ``HORIZON``
creates about ``p_m * HORIZON`` machines of shape ``m`` arrive, so the
chance that its slots run out is taken as

    scarce_m = exp(-N_m / (p_m * HORIZON))        near 1 for the last slots, 0 for plenty

and placing a machine on a host costs the slots it takes there from the
shapes *bigger* than itself, each weighted by how scarce they are:

    cost(host) = sum over shapes m bigger than the machine of  scarce_m * slots_m lost

A small machine is kept off the last few 8-cpu holes while it has other
room, and an 8-cpu machine goes to the hole that fits it best (a 16-cpu
hole would cost it a scarce 16-cpu slot). Its own and smaller shapes are not
charged: it takes about as many of their slots wherever it goes, and
charging them turns the term into a best fit that piles every machine onto
the fullest host (which brokers with stale views then race for, and which
goes past 90 %).

A hole kept for a big machine pays only while the region has room for the
rest. When the broker has lately turned away creates for lack of room (more
than ``MISSED_LIMIT`` of them), every cpu will be taken by whatever comes,
and a kept hole turns many small creates away for one big one: the term
fades to 0 as the share of creates turned away reaches the limit. With no
mix yet (a broker just started) the term is 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np
import numpy.typing as npt

from bodega.placement.candidate_table import CandidateTable, Floats
from bodega.placement.request import PlacementRequest

Rows = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

HORIZON = 500.0  # creates ahead over which a shape's slots should not run out
MISSED_LIMIT = 0.005  # share of recent creates turned away at which the term is off


@dataclass(frozen=True)
class _Region:
    """What every row's cost shares: each shape's cpus, memory and slots on each host, and
    how scarce its slots are. Worked out once per change of the table or the mix, not once
    per worker scored (the broker scores each worker it asks, and the top of an explanation,
    one at a time)."""

    key: tuple[int, int]
    shape_cpu: Floats  # shapes x hosts, millicpus
    shape_mem: Floats  # shapes x 1, MB
    runs: Bools  # shapes x hosts: the host is live, uncordoned and offers the cpu kind
    slots: Floats  # shapes x hosts
    scarce: Floats  # shapes


_regions: WeakKeyDictionary[CandidateTable, _Region] = WeakKeyDictionary()


def _region(table: CandidateTable) -> _Region | None:
    """None when the term is off: no mix yet, or a region turning creates away."""
    mix = table.shapes.columns()
    room = 1.0 - table.shapes.missed_share / MISSED_LIMIT
    if not len(mix) or room <= 0.0:
        return None
    key = (table.version, table.shapes.version)
    cached = _regions.get(table)
    if cached is not None and cached.key == key:
        return cached
    shared = table.column("shared_mcpu")
    usable = table.flag("alive") & ~table.flag("cordoned")
    free_cpu = np.maximum(table.column("total_mcpu") - table.column("used_mcpu"), 0.0)
    free_mem = np.maximum(table.column("total_mem") - table.column("used_mem"), 0.0)
    shape_cpu = np.where(mix.performance[:, None], mix.cpus[:, None] * 1000.0,
                         mix.cpus[:, None] * shared[None, :])
    shape_mem = np.maximum(mix.memory_mb, 1.0)[:, None]
    runs = usable[None, :] & np.where(mix.performance[:, None],
                                      table.flag("performance_ok")[None, :],
                                      table.flag("shared_ok")[None, :])
    slots = np.where(runs, np.minimum(free_cpu[None, :] // shape_cpu,
                                      free_mem[None, :] // shape_mem), 0.0)
    expected = np.maximum(mix.share * HORIZON, 1e-9)
    scarce = np.exp(-slots.sum(axis=1) / expected) * room
    region = _Region(key, shape_cpu, shape_mem, runs, slots, scarce)
    _regions[table] = region
    return region


def holes_taken(request: PlacementRequest, table: CandidateTable, rows: Rows) -> Floats:
    """For each row: the scarce slots of bigger shapes the machine would take there."""
    region = _region(table) if len(rows) else None
    if region is None:
        return np.zeros(len(rows))
    ask = request.ask
    need = (np.full(len(rows), ask.cpus * 1000.0) if ask.cpu_kind == "performance"
            else ask.cpus * table.column("shared_mcpu")[rows])
    left_cpu = np.maximum(table.column("total_mcpu")[rows] - table.column("used_mcpu")[rows]
                          - need, 0.0)
    left_mem = np.maximum(table.column("total_mem")[rows] - table.column("used_mem")[rows]
                          - ask.memory_mb, 0.0)
    shape_cpu = region.shape_cpu[:, rows]
    after = np.where(region.runs[:, rows], np.minimum(left_cpu[None, :] // shape_cpu,
                                                      left_mem[None, :] // region.shape_mem),
                     0.0)
    lost = np.where(shape_cpu > need[None, :], region.slots[:, rows] - after, 0.0)
    cost: Floats = region.scarce @ lost
    return cost
