"""The topology screen's content: regions, their totals, and their workers as bars.

A worker's card has a cpu and a memory bar with one segment per machine that
holds room there (coloured by the machine's state), then what is reserved
(room held by reservations and creates in flight: the worker's used figure
less its machines), then what is free. Stopped machines hold nothing and are
only counted.

A region with more workers than a page holds (``PAGE_SIZE``, as Nomad stops
labelling nodes past 50) shows its totals over every worker, a strip with one
cell per worker shaded by how full it is (a row of the strip is a page), and
the cards of one page. So a thousand workers cost the page fifty cards and a
thousand small squares, not a thousand cards.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bodega.broker.ui.core.bars import Bar, Part, bar
from bodega.broker.ui.core.rows import MachineSlice, WorkerView, dom_key, natural

PAGE_SIZE = 50
LOAD_LEVELS = 5  # a strip cell's shade: 0 (idle) .. 4 (full)
# The order states are stacked in a region's bars: running first, trouble last.
STATE_ORDER = ("started", "starting", "restarting", "updating", "replacing", "created",
               "suspending", "suspended", "stopping", "destroying", "launch_failed")


@dataclass(frozen=True)
class WorkerCard:
    worker: WorkerView
    cpu: Bar
    memory: Bar
    disk: Bar
    machines: tuple[MachineSlice, ...]  # those holding room, in the bars' order
    resting: int  # machines holding nothing (stopped, failed)


@dataclass(frozen=True)
class RegionTotals:
    region: str
    workers: int
    conditions: tuple[tuple[str, int], ...]  # (alive|cordoned|suspect|dead|..., count)
    machines: int  # machines holding room
    cpu: Bar  # one part per machine state, then room on workers that cannot take any
    memory: Bar


@dataclass(frozen=True)
class StripCell:
    name: str
    key: str
    condition: str
    load: int  # 0..LOAD_LEVELS-1, from the fuller of cpu and memory
    percent: int
    row: int
    column: int


@dataclass(frozen=True)
class RegionView:
    totals: RegionTotals
    cards: tuple[WorkerCard, ...]
    page: int  # 1-based
    pages: int
    strip: tuple[StripCell, ...]  # empty when one page holds every worker

    @property
    def region(self) -> str:
        return self.totals.region

    @property
    def key(self) -> str:
        return dom_key(self.totals.region)


def worker_card(worker: WorkerView, machines: Iterable[MachineSlice]) -> WorkerCard:
    mine = sorted(machines, key=lambda m: (m.app, natural(m.name), m.id))
    holding = tuple(m for m in mine if m.holds)
    totals, used = worker.totals, worker.used
    cpu_parts = [Part(m.id, _label(m), m.state, totals.millicpus_for(m.ask)) for m in holding]
    mem_parts = [Part(m.id, _label(m), m.state, m.memory_mb) for m in holding]
    cpu_reserved = used.millicpus - sum(p.amount for p in cpu_parts)
    mem_reserved = used.memory_mb - sum(p.amount for p in mem_parts)
    disk_parts = []
    if worker.image_disk_gb:
        disk_parts.append(Part("images", "image cache", "images", worker.image_disk_gb))
    disk_parts.append(Part("volumes", "volumes and reservations" if worker.image_disk_gb
                           is not None else "volumes, images and reservations", "volumes",
                           used.disk_gb - (worker.image_disk_gb or 0)))
    return WorkerCard(worker=worker,
                      cpu=bar(totals.millicpus, cpu_parts, cpu_reserved),
                      memory=bar(totals.memory_mb, mem_parts, mem_reserved),
                      disk=bar(totals.disk_gb, disk_parts),
                      machines=holding, resting=len(mine) - len(holding))


def _label(machine: MachineSlice) -> str:
    return f"{machine.app}/{machine.name} ({machine.state})"


def region_totals(region: str, workers: Sequence[WorkerView],
                  machines: Iterable[MachineSlice]) -> RegionTotals:
    by_worker = {w.name: w for w in workers}
    cpu: dict[str, int] = {}
    memory: dict[str, int] = {}
    count = 0
    for m in machines:
        worker = by_worker.get(m.worker)
        if worker is None or not m.holds:
            continue
        count += 1
        cpu[m.state] = cpu.get(m.state, 0) + worker.totals.millicpus_for(m.ask)
        memory[m.state] = memory.get(m.state, 0) + m.memory_mb
    conditions: dict[str, int] = {}
    for w in workers:
        conditions[w.condition] = conditions.get(w.condition, 0) + 1
    # Room nothing may use: what is free on workers that are not alive or are cordoned.
    closed = [w for w in workers if w.condition != "alive"]
    unusable_cpu = sum(max(0, w.totals.millicpus - w.used.millicpus) for w in closed)
    unusable_mem = sum(max(0, w.totals.memory_mb - w.used.memory_mb) for w in closed)
    used_cpu = sum(w.used.millicpus for w in workers)
    used_mem = sum(w.used.memory_mb for w in workers)
    return RegionTotals(
        region=region, workers=len(workers),
        conditions=tuple(sorted(conditions.items(), key=lambda kv: (kv[0] != "alive", kv[0]))),
        machines=count,
        cpu=_region_bar(sum(w.totals.millicpus for w in workers), cpu, used_cpu, unusable_cpu),
        memory=_region_bar(sum(w.totals.memory_mb for w in workers), memory, used_mem,
                           unusable_mem))


def _region_bar(total: int, by_state: Mapping[str, int], used: int, unusable: int) -> Bar:
    order = [s for s in STATE_ORDER if s in by_state] + sorted(set(by_state) - set(STATE_ORDER))
    parts = [Part(s, s, s, by_state[s]) for s in order]
    reserved = used - sum(by_state.values())
    if unusable:
        parts.append(Part("unusable", "free on workers that cannot take machines",
                          "unusable", unusable))
    return bar(total, parts, reserved)


def load_level(worker: WorkerView) -> tuple[int, int]:
    """(shade, percent) from the fuller of cpu and memory."""
    shares = [used / total for used, total in
              ((worker.used.millicpus, worker.totals.millicpus),
               (worker.used.memory_mb, worker.totals.memory_mb)) if total > 0]
    share = min(1.0, max(shares, default=0.0))
    return min(LOAD_LEVELS - 1, math.floor(share * LOAD_LEVELS)), round(share * 100)


def pages_of(count: int) -> int:
    return max(1, math.ceil(count / PAGE_SIZE))


def region_view(region: str, workers: Iterable[WorkerView],
                machines: Iterable[MachineSlice], page: int = 1) -> RegionView:
    """One region: totals over every worker, the cards of ``page`` (clamped to the range)."""
    ordered = sorted(workers, key=lambda w: natural(w.name))
    all_machines = list(machines)
    pages = pages_of(len(ordered))
    page = min(max(1, page), pages)
    shown = ordered[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    by_worker: dict[str, list[MachineSlice]] = {w.name: [] for w in shown}
    for m in all_machines:
        if m.worker in by_worker:
            by_worker[m.worker].append(m)
    strip: tuple[StripCell, ...] = ()
    if pages > 1:
        strip = tuple(StripCell(w.name, w.key, w.condition, *load_level(w),
                                row=i // PAGE_SIZE, column=i % PAGE_SIZE)
                      for i, w in enumerate(ordered))
    return RegionView(totals=region_totals(region, ordered, all_machines),
                      cards=tuple(worker_card(w, by_worker[w.name]) for w in shown),
                      page=page, pages=pages, strip=strip)


def topology(workers: Iterable[WorkerView], machines: Iterable[MachineSlice],
             pages: Mapping[str, int] | None = None) -> list[RegionView]:
    """Every region, in name order; ``pages`` picks the page shown per region (default 1)."""
    by_region: dict[str, list[WorkerView]] = {}
    for w in workers:
        by_region.setdefault(w.region, []).append(w)
    machines_by_region: dict[str, list[MachineSlice]] = {r: [] for r in by_region}
    for m in machines:
        if m.region in machines_by_region:
            machines_by_region[m.region].append(m)
    return [region_view(r, by_region[r], machines_by_region[r], (pages or {}).get(r, 1))
            for r in sorted(by_region)]
