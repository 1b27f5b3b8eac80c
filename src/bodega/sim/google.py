"""A loader for the Google cluster-data 2011 ``task_events`` table (clusterdata-2011-2).

Each row is one event of one task, as CSV without a header, in this column
order (the schema in the trace's documentation)::

    0 timestamp (microseconds; 0 = before the trace, 2^63-1 = after it)
    1 missing info   2 job ID   3 task index   4 machine ID   5 event type
    6 user   7 scheduling class   8 priority   9 CPU request   10 memory request
    11 disk request   12 different-machine constraint

Event types: 0 SUBMIT, 1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH, 5 KILL,
6 LOST, 7 UPDATE_PENDING, 8 UPDATE_RUNNING. A task becomes an ``Arrival``
when it is first SCHEDULEd (it starts running) and leaves at its next
EVICT, FAIL, FINISH, KILL or LOST; one still running at the end of the
file runs to the end. Requests are normalized to the largest machine of the
Google cell (1.0), so ``cpus_per_unit`` and ``memory_mb_per_unit`` say what
that machine is here; a task becomes a machine of its job's app (``job-ID``)
with ``cpus`` rounded up to a whole cpu of ``cpu_kind``. A rescheduled task
(evicted, then scheduled again) arrives again.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from bodega.sim.trace import Arrival, Trace

SCHEDULE = 1
ENDS = frozenset({2, 3, 4, 5, 6})  # EVICT, FAIL, FINISH, KILL, LOST
COLUMNS = 13
AFTER_TRACE = 2**63 - 1


class GoogleMapping(BaseModel):
    """How the trace's normalized requests become bodega machine sizes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus_per_unit: float = Field(default=64.0, gt=0)  # cpus of the trace's largest machine
    memory_mb_per_unit: float = Field(default=262144.0, gt=0)
    cpu_kind: str = "shared"
    regions: tuple[str, ...] = ("ams",)  # jobs are spread over these by job ID
    min_lifetime: float = Field(default=1.0, gt=0)  # seconds


class TraceFormatError(ValueError):
    """A row that is not a task_events row; says which line and why."""


@dataclass
class _Running:
    start: float
    cpu: float
    memory: float


def parse_task_events(lines: Iterable[str], mapping: GoogleMapping | None = None,
                      name: str = "google-2011") -> Trace:
    m = mapping or GoogleMapping()
    running: dict[tuple[str, str], _Running] = {}
    arrivals: list[Arrival] = []
    last = 0.0

    def arrive(key: tuple[str, str], task: _Running, end: float) -> None:
        job = key[0]
        arrivals.append(Arrival(
            time=task.start, app=f"job-{job}", region=m.regions[int(job) % len(m.regions)],
            cpu_kind=m.cpu_kind, cpus=max(1, math.ceil(task.cpu * m.cpus_per_unit)),
            memory_mb=max(1, math.ceil(task.memory * m.memory_mb_per_unit)),
            lifetime=max(m.min_lifetime, end - task.start)))

    for number, row in enumerate(csv.reader(lines), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != COLUMNS:
            raise TraceFormatError(f"task_events line {number}: {len(row)} columns, expected "
                                   f"{COLUMNS}")
        try:
            stamp, job, index, kind = int(row[0]), row[2].strip(), row[3].strip(), int(row[5])
            int(job)
            int(index)
            cpu = float(row[9]) if row[9].strip() else 0.0
            memory = float(row[10]) if row[10].strip() else 0.0
        except ValueError:
            raise TraceFormatError(f"task_events line {number}: timestamp, job ID, task index "
                                   "and event type must be integers and requests numbers, got "
                                   f"{','.join(row)!r}") from None
        if stamp == AFTER_TRACE:
            continue  # happens after the trace window: nothing to replay
        at = stamp / 1e6
        last = max(last, at)
        key = (job, index)
        if kind == SCHEDULE and key not in running:
            running[key] = _Running(at, cpu, memory)
        elif kind in ENDS and key in running:
            arrive(key, running.pop(key), at)
    for key, task in running.items():
        arrive(key, task, last)
    return Trace.of(name, arrivals)


def read_task_events(path: Path, mapping: GoogleMapping | None = None) -> Trace:
    """Read a task_events CSV file (or a ``.csv.gz`` part file as published)."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", newline="") as packed:
            return parse_task_events(packed, mapping, name=path.name)
    with path.open(newline="") as plain:
        return parse_task_events(plain, mapping, name=path.name)
