"""What placement needs to know about an app's machines, kept current instead of recounted.

A create must know how many active machines of its app each worker holds
(to spread the app) and whether its name is taken. Recounting the app's
machines on every create costs O(machines) per create; this index is
updated as machines arrive (from the view, and from this broker's own
writes) and answers both in O(workers of the app).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from bodega.broker.view.core.freshness import stamp
from bodega.model.machine import Machine

INACTIVE = frozenset({"destroyed", "destroying"})
EMPTY: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True)
class Entry:
    app: str
    worker: str
    name: str
    active: bool
    updated_at: float  # the doc's updated_at, parsed: what decides which doc is newer


class MachineIndex:
    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._counts: dict[str, Counter[str]] = {}
        self._by_worker: dict[str, Counter[str]] = {}  # worker -> app -> active machines
        self._names: dict[tuple[str, str], str] = {}
        # Told of every change of an app's count on a worker: (app, worker, +1 or -1).
        self.on_count: Callable[[str, str, int], None] = lambda _app, _worker, _delta: None

    def __len__(self) -> int:
        return len(self._entries)

    def note(self, machine: Machine) -> None:
        """A machine from a worker or the view; older news than we hold is ignored."""
        machine_id = machine.id
        if not machine_id or not machine.app:
            return
        entry = Entry(app=machine.app, worker=machine.worker or "", name=machine.name,
                      active=machine.state not in INACTIVE, updated_at=stamp(machine))
        old = self._entries.get(machine_id)
        if old is not None and old.updated_at > entry.updated_at:
            return
        if old is not None:
            self._drop(machine_id, old)
        self._entries[machine_id] = entry
        if entry.active:
            self._counts.setdefault(entry.app, Counter())[entry.worker] += 1
            self._by_worker.setdefault(entry.worker, Counter())[entry.app] += 1
            self.on_count(entry.app, entry.worker, 1)
            if entry.name:
                self._names[(entry.app, entry.name)] = machine_id

    def forget(self, machine_id: str) -> None:
        old = self._entries.pop(machine_id, None)
        if old is not None:
            self._drop(machine_id, old)

    def _drop(self, machine_id: str, entry: Entry) -> None:
        if entry.active:
            counts = self._counts[entry.app]
            counts[entry.worker] -= 1
            if counts[entry.worker] <= 0:
                del counts[entry.worker]
            apps = self._by_worker[entry.worker]
            apps[entry.app] -= 1
            if apps[entry.app] <= 0:
                del apps[entry.app]
            self.on_count(entry.app, entry.worker, -1)
            if self._names.get((entry.app, entry.name)) == machine_id:
                del self._names[(entry.app, entry.name)]

    def colocated(self, app: str) -> Mapping[str, int]:
        """Active machines of ``app`` per worker (a live view: read it, do not keep it)."""
        return self._counts.get(app, EMPTY)

    def on_worker(self, worker: str) -> Mapping[str, int]:
        """Active machines per app on ``worker`` (a live view)."""
        return self._by_worker.get(worker, EMPTY)

    def name_taken(self, app: str, name: str) -> bool:
        return (app, name) in self._names
