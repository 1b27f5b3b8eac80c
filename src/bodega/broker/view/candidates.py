"""The workers placement can choose from: one ``CandidateTable`` per region, kept current.

Built from the view's ``workers`` rows and membership statuses, then updated
row by row as changes arrive, so a placement never rebuilds a region. After
a worker says yes, the broker adds the machine to that worker's row at once
(``claimed``, from the moment the create is sent until the worker answers):
the worker's own republished capacity arrives a little later, and without
this, concurrent creates would all pile onto the same "best" worker and be
turned away one after another. A destroy through the broker gives the room
back the same way (``released``), or a create right after it would be
turned away from a host the view still shows full.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace

from bodega.broker.view.catalog import Catalog
from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest
from bodega.model.rows import Free, WorkerRow
from bodega.placement import Candidate, CandidateTable
from bodega.placement.regions import parse as parse_regions

log = logging.getLogger("bodega.broker.view.candidates")


def unknown_regions(unknown: list[str], known: list[str]) -> str:
    """The message for regions no worker serves, with the ones that exist."""
    named = ", ".join(unknown)
    return (f"invalid_argument: {'region' if len(unknown) == 1 else 'regions'} {named} "
            f"{'has' if len(unknown) == 1 else 'have'} no workers in this cluster; "
            f"its {'region is' if len(known) == 1 else 'regions are'} {', '.join(known)}")


class Candidates:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._tables: dict[str, CandidateTable] = {}
        self._region_of: dict[str, str] = {}
        # Active machines per app on a worker (the broker's machine index), so each table
        # keeps an app's machines per worker as a column and co-location costs no lookups.
        self.apps_on: Callable[[str], Mapping[str, int]] = lambda _worker: {}

    def count(self, app: str, worker: str, delta: int) -> None:
        """The machine index saw an app's count on ``worker`` change."""
        region = self._region_of.get(worker)
        if region is not None:
            self._tables[region].add_count(app, worker, delta)

    def load(self) -> None:
        """(Re)read every worker from the view; the shapes each region was asked for stay."""
        mixes = {region: table.shapes for region, table in self._tables.items()}
        self._tables.clear()
        self._region_of.clear()
        for row in self.catalog.rows(WorkerRow):
            self._put(row)
        for region, table in self._tables.items():
            table.shapes = mixes.get(region, table.shapes)

    def regions(self) -> list[str]:
        return sorted(r for r, t in self._tables.items() if len(t))

    def asked(self, expression: str | None, default: str) -> tuple[str, ...]:
        """The regions a create (a machine's, a volume's, or a simulated one) may use, in
        order: ``expression``, else the broker's ``default``.

        A region the client names that has no worker at all, alive or not, is an
        error (400) naming it and the regions the cluster has: "insufficient
        capacity" would send them waiting for room that will never come. The
        broker's own default is not checked, nor is anything while the cluster
        has no workers yet (placement then says no worker serves it).
        """
        known = self.regions()
        try:
            regions = parse_regions(expression or default, known,
                                    nearest=default.split(",")[0])
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: {exc}") from None
        unknown = [r for r in regions if r not in known]
        if expression and known and unknown:
            raise BadRequest(unknown_regions(unknown, known))
        return regions

    def table(self, region: str) -> CandidateTable:
        return self._tables.get(region) or CandidateTable(region)

    def get(self, name: str) -> Candidate | None:
        region = self._region_of.get(name)
        if region is None:
            return None
        table = self._tables[region]
        i = table.index(name)
        return None if i is None else table.candidate(i)

    def all(self) -> list[Candidate]:
        return [t.candidate(i) for t in self._tables.values() for i in range(len(t))]

    # -- keeping current ----------------------------------------------------------------
    def on_worker(self, name: str) -> None:
        """The view's row for worker ``name`` changed (or went away)."""
        row = self.catalog.get(WorkerRow, name)
        if row is None:
            self._remove(name)
        else:
            self._put(row)

    def on_member(self, name: str) -> None:
        candidate = self.get(name)
        if candidate is not None:
            status = self.catalog.member_status(name) or "alive"
            self._tables[candidate.region].put(replace(candidate, status=status))

    def claimed(self, name: str, ask: Ask, undo: bool = False) -> None:
        """A create of ``ask`` went to a worker: count it until the worker's own figures
        arrive; ``undo`` takes it back out when the worker said no or failed."""
        candidate = self.get(name)
        if candidate is not None:
            used = (candidate.used.minus(candidate.totals, ask) if undo
                    else candidate.used.plus(candidate.totals, ask))
            self._tables[candidate.region].put(replace(candidate, used=used))

    def released(self, name: str, ask: Ask) -> None:
        """A machine of ``ask`` was destroyed on worker ``name``: its room counts as free
        until the worker's own figures arrive. Counting too little is safe (a full worker
        says no, with what it has free, and is believed); counting too much would turn
        creates away from a host with room."""
        self.claimed(name, ask, undo=True)

    def refused(self, name: str, free: Free | None, full: bool = False) -> None:
        """A worker said no; if it said what it has free, believe it over the view.

        ``full`` (it is cordoned, or out of machine addresses) counts the worker
        as full until its next row arrives, which it publishes when that changes,
        so that later placements do not ask it again and again in the meantime.
        """
        candidate = self.get(name)
        if candidate is None:
            return
        totals = candidate.totals
        if full:
            used = replace(candidate.used, millicpus=totals.millicpus, memory_mb=totals.memory_mb)
        elif free is None:
            return
        else:
            used = replace(candidate.used, millicpus=totals.millicpus - free.millicpus,
                           memory_mb=totals.memory_mb - free.memory_mb,
                           disk_gb=totals.disk_gb - free.disk_gb)
        self._tables[candidate.region].put(replace(candidate, used=used))

    def _put(self, row: WorkerRow) -> None:
        name = row.name
        candidate = Candidate.from_view(row, self.catalog.member_status(name) or "alive")
        previous = self._region_of.get(name)
        if previous is not None and previous != candidate.region:
            self._tables[previous].remove(name)
        self._region_of[name] = candidate.region
        table = self._tables.setdefault(candidate.region, CandidateTable(candidate.region))
        new = table.index(name) is None
        table.put(candidate)
        if new:
            for app, count in self.apps_on(name).items():
                table.add_count(app, name, count)

    def _remove(self, name: str) -> None:
        region = self._region_of.pop(name, None)
        if region is not None:
            self._tables[region].remove(name)
