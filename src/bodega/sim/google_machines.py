"""A loader for the Google cluster-data 2011 ``machine_events`` table: the cell's hosts, and
when each was out of service.

Each row is one event of one machine, as CSV without a header::

    0 timestamp (microseconds)   1 machine ID   2 event type (0 ADD, 1 REMOVE, 2 UPDATE)
    3 platform ID   4 CPUs   5 memory            (capacities normalized to the largest, 1.0)

The fleet is the machines ADDed at the start of the trace (timestamp 0),
with their capacities scaled as the task loader scales requests
(``GoogleMapping``: cpus rounded to a whole cpu, at least one); a machine
first ADDed later, or ADDed with no capacity, is left out. A REMOVE of a
machine in the fleet starts an ``Outage`` that ends at its next ADD (or at
the end of the file): in the trace, a removal is mostly a failure, and the
machine comes back as a new one. UPDATEs (capacity changes) are ignored.
Machines go to ``mapping.regions`` by machine ID, as jobs do by job ID.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bodega.sim.fleet import FleetSpec, HostShape, RegionSpec
from bodega.sim.google import GoogleMapping, TraceFormatError
from bodega.sim.trace import Outage

ADD, REMOVE = 0, 1
COLUMNS = 6


@dataclass(frozen=True)
class GoogleFleet:
    fleet: FleetSpec
    outages: tuple[Outage, ...]
    hosts: dict[str, str]  # machine ID -> the host name it became


def parse_machine_events(lines: Iterable[str], mapping: GoogleMapping | None = None) -> GoogleFleet:
    m = mapping or GoogleMapping()
    shapes: dict[str, tuple[int, int]] = {}  # machine -> (cpus, memory MB), the fleet at start
    down_since: dict[str, float] = {}
    spells: list[tuple[str, float, float | None]] = []  # machine, down at, back at
    last = 0.0
    for number, row in enumerate(csv.reader(lines), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != COLUMNS:
            raise TraceFormatError(f"machine_events line {number}: {len(row)} columns, "
                                   f"expected {COLUMNS}")
        try:
            stamp, machine, kind = int(row[0]), row[1].strip(), int(row[2])
            int(machine)
            cpu = float(row[4]) if row[4].strip() else 0.0
            memory = float(row[5]) if row[5].strip() else 0.0
        except ValueError:
            raise TraceFormatError(f"machine_events line {number}: timestamp, machine ID and "
                                   "event type must be integers and capacities numbers, got "
                                   f"{','.join(row)!r}") from None
        at = stamp / 1e6
        last = max(last, at)
        if kind == ADD and stamp == 0 and cpu > 0 and memory > 0:
            shapes[machine] = (max(1, round(cpu * m.cpus_per_unit)),
                               max(1, math.ceil(memory * m.memory_mb_per_unit)))
        elif kind == REMOVE and machine in shapes and machine not in down_since:
            down_since[machine] = at
        elif kind == ADD and machine in down_since:
            spells.append((machine, down_since.pop(machine), at))
    spells += [(machine, at, None) for machine, at in down_since.items()]
    return _fleet(shapes, spells, last, m)


def _fleet(shapes: dict[str, tuple[int, int]], spells: list[tuple[str, float, float | None]],
           last: float, m: GoogleMapping) -> GoogleFleet:
    """Host names follow ``build_hosts``: per region, shape by shape, ``{region}-{n:03d}``."""
    regions: list[RegionSpec] = []
    names: dict[str, str] = {}
    for r, region in enumerate(m.regions):
        mine = sorted((shape, int(machine)) for machine, shape in shapes.items()
                      if int(machine) % len(m.regions) == r)
        counts: dict[tuple[int, int], int] = {}
        for n, (shape, machine) in enumerate(mine, start=1):
            counts[shape] = counts.get(shape, 0) + 1
            names[str(machine)] = f"{region}-{n:03d}"
        if counts:
            regions.append(RegionSpec(name=region, hosts=tuple(
                HostShape(cpus=c, memory_mb=mem, count=k) for (c, mem), k in counts.items())))
    outages = [Outage(time=down, host=names[machine],
                      duration=max(1.0, (last if back is None else back) - down))
               for machine, down, back in spells]
    return GoogleFleet(FleetSpec(regions=tuple(regions)),
                       tuple(sorted(outages, key=lambda o: (o.time, o.host))), names)


def read_machine_events(path: Path, mapping: GoogleMapping | None = None) -> GoogleFleet:
    """Read a machine_events CSV file (or a ``.csv.gz`` part file as published)."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", newline="") as packed:
            return parse_machine_events(packed, mapping)
    with path.open(newline="") as plain:
        return parse_machine_events(plain, mapping)
