"""The other members as one node sees them, with the suspicion timer of each suspect."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bodega.registry.config import SwimConfig
from bodega.registry.members import EventKind, MemberRecord, Status, change_kind, supersedes
from bodega.registry.suspicion import Suspicion


@dataclass(frozen=True)
class Change:
    """A record this node accepted: it is news to pass on, and maybe an event."""

    old: MemberRecord | None
    new: MemberRecord

    @property
    def kind(self) -> EventKind | None:
        return change_kind(self.old, self.new)


class MemberTable:
    def __init__(self, config: SwimConfig) -> None:
        self._config = config
        self._records: dict[str, MemberRecord] = {}
        self._since: dict[str, float] = {}  # when each member's status last changed
        self._suspicions: dict[str, Suspicion] = {}
        self.live = 1  # members alive or suspect, counting the local node
        self.version = 0  # bumped on every change: views built from the table cache on it
        self._cached: dict[tuple[Status, ...], tuple[int, list[MemberRecord]]] = {}

    def __iter__(self) -> Iterator[MemberRecord]:
        return iter(self._records.values())

    def get(self, name: str) -> MemberRecord | None:
        return self._records.get(name)

    def since(self, name: str) -> float:
        return self._since[name]

    def suspicion(self, name: str) -> Suspicion | None:
        return self._suspicions.get(name)

    def apply(self, now: float, record: MemberRecord) -> Change | None:
        """Merge one claim; the change to pass on, or None if it was old news."""
        old = self._records.get(record.name)
        if old is None or supersedes(record, old):
            self._store(now, old, record)
            return Change(old, record)
        if (record.status is Status.SUSPECT and old.status is Status.SUSPECT
                and (record.generation, record.incarnation) == (old.generation, old.incarnation)):
            suspicion = self._suspicions.get(record.name)
            if suspicion is not None and suspicion.confirm(record.by):
                return Change(old, record)  # memberlist passes new confirmations on too
        return None

    def expire(self, now: float, local: str) -> list[Change]:
        """Suspects whose timers ran out, declared dead by ``local``."""
        changes = []
        for name, suspicion in list(self._suspicions.items()):
            if now < suspicion.deadline:
                continue
            del self._suspicions[name]
            record = self._records[name]
            if record.status is Status.SUSPECT and record.incarnation == suspicion.incarnation:
                dead = record.with_status(Status.DEAD, by=local)
                self._store(now, record, dead)
                changes.append(Change(record, dead))
        return changes

    def reap(self, now: float) -> None:
        """Forget members dead or gone for longer than the retention."""
        horizon = now - self._config.dead_retention
        for name in [n for n, r in self._records.items()
                     if not r.status.live and self._since[n] < horizon]:
            del self._records[name]
            del self._since[name]
            self.version += 1

    def _store(self, now: float, old: MemberRecord | None, record: MemberRecord) -> None:
        name = record.name
        self._records[name] = record
        self.version += 1
        self.live += int(record.status.live) - int(old is not None and old.status.live)
        new_life = old is None or old.generation != record.generation
        if new_life or old is None or old.status is not record.status:
            self._since[name] = now
        if record.status is Status.SUSPECT:
            current = self._suspicions.get(name)
            if new_life or current is None or current.incarnation != record.incarnation:
                self._suspicions[name] = Suspicion.start(
                    self._config, now, self.live, record.incarnation, record.by)
        else:
            self._suspicions.pop(name, None)

    def names(self, *statuses: Status) -> list[str]:
        return [n for n, r in self._records.items() if r.status in statuses]

    def with_status(self, *statuses: Status) -> list[MemberRecord]:
        """Records in these statuses, in table order; built once per table change.

        Probing, gossip, push-pull and announcements each ask several times a
        second: rebuilding an N-long list every time made per-node CPU grow with N.
        The list is shared: callers must not change it.
        """
        cached = self._cached.get(statuses)
        if cached is None or cached[0] != self.version:
            cached = (self.version, [r for r in self._records.values() if r.status in statuses])
            self._cached[statuses] = cached
        return cached[1]

    def is_live(self, name: str) -> bool:
        record = self._records.get(name)
        return record is not None and record.status.live
