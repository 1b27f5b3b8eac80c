"""A region's workers as columns, so filters and scores run over all of them at once.

Ranking a thousand workers one Python object at a time costs milliseconds;
as numpy columns it costs tens of microseconds. The broker keeps one table
per region and updates a row in place when the view reports a change, so a
busy region is never rebuilt per request. ``Candidate`` objects stay the
unit of explanation: ``candidate(i)`` gives back the one a row came from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

from bodega.model.machine_config import ISOLATIONS
from bodega.placement.request import Candidate
from bodega.placement.shapes import ShapeMix

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]

_COLUMNS = ("total_mcpu", "used_mcpu", "shared_mcpu", "total_mem", "used_mem", "total_disk",
            "used_disk")
_FLAGS = ("alive", "cordoned", "shared_ok", "performance_ok", "has_gpus", "runs_images",
          *(f"{isolation}_ok" for isolation in ISOLATIONS))


class CandidateTable:
    def __init__(self, region: str, candidates: Iterable[Candidate] = ()) -> None:
        self.region = region
        self._candidates: list[Candidate] = []
        self._index: dict[str, int] = {}
        self._capacity = 0
        self._columns: dict[str, Floats] = {}
        self._flags: dict[str, Bools] = {}
        self._order: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._image_masks: dict[str, Bools] = {}
        self._names: list[str] | None = None
        self._app_counts: dict[str, Floats] = {}  # app -> machines of it per row
        self.shapes = ShapeMix()  # the shapes recently asked for here, noted by the broker
        self.version = 0  # bumped at every change of a row, for figures derived from them
        self._grow(16)
        for candidate in candidates:
            self.put(candidate)

    # -- rows -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._candidates)

    def __iter__(self) -> Iterator[Candidate]:
        return iter(list(self._candidates))

    def candidate(self, i: int) -> Candidate:
        return self._candidates[i]

    def index(self, name: str) -> int | None:
        return self._index.get(name)

    def names(self) -> list[str]:
        """Worker names in row order (do not modify: it is kept between calls)."""
        if self._names is None:
            self._names = [c.name for c in self._candidates]
        return self._names

    def put(self, candidate: Candidate) -> None:
        """Add a worker, or replace what is known about it."""
        self.version += 1
        i = self._index.get(candidate.name)
        if i is None:
            i = len(self._candidates)
            if i == self._capacity:
                self._grow(self._capacity * 2)
            self._candidates.append(candidate)
            self._index[candidate.name] = i
            self._order = np.zeros(0, dtype=np.int64)  # names changed: re-derive tie order
            self._names = None
            self._image_masks.clear()
            for counts in self._app_counts.values():
                counts[i] = 0.0
        else:
            old = self._candidates[i]
            self._candidates[i] = candidate
            if old.images != candidate.images:
                for image, mask in self._image_masks.items():
                    mask[i] = image in candidate.images
        self._write(i, candidate)

    def remove(self, name: str) -> None:
        i = self._index.pop(name, None)
        if i is None:
            return
        self.version += 1
        last = len(self._candidates) - 1
        moved = self._candidates.pop()
        if i != last:  # move the last row into the hole
            self._candidates[i] = moved
            self._index[moved.name] = i
            self._write(i, moved)
            for counts in self._app_counts.values():
                counts[i] = counts[last]
        for counts in self._app_counts.values():
            counts[last] = 0.0
        self._order = np.zeros(0, dtype=np.int64)
        self._names = None
        self._image_masks.clear()

    def _grow(self, capacity: int) -> None:
        for name in _COLUMNS:
            column = np.zeros(capacity, dtype=np.float64)
            if name in self._columns:
                column[: self._capacity] = self._columns[name][: self._capacity]
            self._columns[name] = column
        for name in _FLAGS:
            flag = np.zeros(capacity, dtype=np.bool_)
            if name in self._flags:
                flag[: self._capacity] = self._flags[name][: self._capacity]
            self._flags[name] = flag
        for app, counts in self._app_counts.items():
            grown = np.zeros(capacity, dtype=np.float64)
            grown[: self._capacity] = counts[: self._capacity]
            self._app_counts[app] = grown
        self._capacity = capacity

    def _write(self, i: int, c: Candidate) -> None:
        totals, used = c.totals, c.used
        col, flag = self._columns, self._flags
        col["total_mcpu"][i] = totals.millicpus
        col["used_mcpu"][i] = used.millicpus
        col["shared_mcpu"][i] = math.ceil(1000 / totals.shared_cpu_ratio)
        col["total_mem"][i] = totals.memory_mb
        col["used_mem"][i] = used.memory_mb
        col["total_disk"][i] = totals.disk_gb
        col["used_disk"][i] = used.disk_gb
        flag["alive"][i] = c.status == "alive"
        flag["cordoned"][i] = c.cordoned
        flag["shared_ok"][i] = "shared" in totals.cpu_kinds
        flag["performance_ok"][i] = "performance" in totals.cpu_kinds
        flag["has_gpus"][i] = bool(totals.gpus)
        flag["runs_images"][i] = not c.images_off
        for isolation in ISOLATIONS:
            flag[f"{isolation}_ok"][i] = isolation in totals.isolations

    # -- columns ----------------------------------------------------------------------
    def column(self, name: str) -> Floats:
        return self._columns[name][: len(self._candidates)]

    def flag(self, name: str) -> Bools:
        return self._flags[name][: len(self._candidates)]

    def image_mask(self, image: str) -> Bools:
        mask = self._image_masks.get(image)
        if mask is None:
            mask = np.fromiter((image in c.images for c in self._candidates), dtype=np.bool_,
                               count=len(self._candidates))
            self._image_masks[image] = mask
        return mask

    # -- machines of an app per worker, kept by whoever indexes machines (the broker) --
    def add_count(self, app: str, name: str, delta: int) -> None:
        i = self._index.get(name)
        if i is None:
            return
        counts = self._app_counts.get(app)
        if counts is None:
            counts = self._app_counts[app] = np.zeros(self._capacity, dtype=np.float64)
        counts[i] = max(0.0, counts[i] + delta)  # never below none, whatever the order

    def app_counts(self, app: str) -> Floats | None:
        """Machines of ``app`` per row, if this table is told of them (else None)."""
        counts = self._app_counts.get(app)
        return None if counts is None else counts[: len(self._candidates)]

    def name_order(self) -> npt.NDArray[np.int64]:
        """Each row's rank by worker name: the tie-breaker that makes rankings stable."""
        if len(self._order) != len(self._candidates):
            names = [c.name for c in self._candidates]
            ranks = np.empty(len(names), dtype=np.int64)
            ranks[np.argsort(np.array(names, dtype=object), kind="stable")] = np.arange(len(names))
            self._order = ranks
        return self._order
