"""The other members as one node sees them, with the suspicion timer of each suspect.

Hosted members (``MemberRecord.host`` set: a process its host's agent speaks
for) are kept apart from the indexes that pick whom to probe, gossip to or
pull from, and hold no suspicion timer here: no one but their agent judges
them, and nothing is sent to them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.memberdigest import MemberDigest
from bodega.registry.membership.core.members import (
    EventKind,
    MemberRecord,
    MemberView,
    Status,
    change_kind,
    supersedes,
)
from bodega.registry.membership.core.suspicion import Suspicion


@dataclass(frozen=True)
class Change:
    """A record this node accepted: it is news to pass on, and maybe an event."""

    old: MemberRecord | None
    new: MemberRecord

    @property
    def kind(self) -> EventKind | None:
        return change_kind(self.old, self.new)


class Names:
    """A set of names that can also be sampled in O(k): a list plus each name's position."""

    def __init__(self) -> None:
        self.names: list[str] = []  # read-only for callers; order changes on removal
        self._at: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: str) -> bool:
        return name in self._at

    def add(self, name: str) -> None:
        if name not in self._at:
            self._at[name] = len(self.names)
            self.names.append(name)

    def discard(self, name: str) -> None:
        i = self._at.pop(name, None)
        if i is None:
            return
        last = self.names.pop()
        if last != name:  # move the last name into the hole
            self.names[i] = last
            self._at[last] = i


class MemberTable:
    def __init__(self, config: SwimConfig) -> None:
        self._config = config
        self._records: dict[str, MemberRecord] = {}
        self._since: dict[str, float] = {}  # when each member's status last changed
        self._suspicions: dict[str, Suspicion] = {}
        self.live = 1  # members alive or suspect, counting the local node
        self.version = 0  # bumped on every change: views built from the table cache on it
        # Each member's version when its record last changed, oldest change first (a
        # change moves the name to the end): what changed since a version is read from the
        # end, in O(changes), for the host's processes that follow the table (``since``).
        self._changed: dict[str, int] = {}
        # Names by status, kept as records change, so probing, gossip and pulls can
        # pick members without walking the table: at thousands of members under
        # loss, statuses change every second and any O(N) rebuild per change adds up.
        self.by_status: dict[Status, Names] = {status: Names() for status in Status}
        # Alive members that hold a replica and serve pulls (``meta["sync"]``): a host's
        # agent among its twenty processes. Pushes and pulls pick from these.
        self.holders = Names()
        self.digest = MemberDigest()  # what a push-pull compares first
        self.hosted: dict[str, Names] = {}  # hosted members, by the agent that speaks for them
        self._views: tuple[int, MemberRecord, list[MemberView]] | None = None

    def __iter__(self) -> Iterator[MemberRecord]:
        return iter(self._records.values())

    def get(self, name: str) -> MemberRecord | None:
        return self._records.get(name)

    def views(self, local: MemberRecord) -> list[MemberView]:
        """Every member, ``local`` included, sorted by name (built once per change)."""
        cached = self._views
        if cached is None or cached[0] != self.version or cached[1] is not local:
            views = sorted((MemberView.of(r) for r in [local, *self]), key=lambda v: v.name)
            cached = self._views = (self.version, local, views)
        return list(cached[2])

    def since(self, name: str) -> float:
        return self._since[name]

    def changed_since(self, version: int) -> list[MemberRecord]:
        """The records stored after ``version`` (what a follower holding the table as it
        was at ``version`` lacks), oldest change first. Members reaped since are not
        named: a follower keeps what it heard of them, as it would without the reap."""
        changed = []
        for name, at in reversed(self._changed.items()):
            if at <= version:
                break
            changed.append(self._records[name])
        return changed[::-1]

    def suspicion(self, name: str) -> Suspicion | None:
        return self._suspicions.get(name)

    def suspicion_deadlines(self) -> dict[str, float]:
        return {name: s.deadline for name, s in self._suspicions.items()}

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

    def next_expiry(self) -> float:
        """When the first suspicion runs out (inf: none held)."""
        return min((s.deadline for s in self._suspicions.values()), default=math.inf)

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
            self._unindex(self._records[name])
            self.digest.replace(self._records[name], None)
            del self._records[name]
            del self._since[name]
            del self._changed[name]
            self.version += 1

    def _unindex(self, record: MemberRecord) -> None:
        if record.host:
            hosted = self.hosted.get(record.host)
            if hosted is not None:
                hosted.discard(record.name)
                if not hosted:
                    del self.hosted[record.host]
            return
        self.by_status[record.status].discard(record.name)
        self.holders.discard(record.name)
        self.live -= int(record.status.live)

    def _store(self, now: float, old: MemberRecord | None, record: MemberRecord) -> None:
        name = record.name
        self._records[name] = record
        self.version += 1
        self._changed.pop(name, None)
        self._changed[name] = self.version
        self.digest.replace(old, record)
        if old is not None:
            self._unindex(old)
        new_life = old is None or old.generation != record.generation
        if new_life or old is None or old.status is not record.status:
            self._since[name] = now
        if record.host:
            self.hosted.setdefault(record.host, Names()).add(name)
            self._suspicions.pop(name, None)  # its agent judges it, not this node
            return
        self.by_status[record.status].add(name)
        if record.status is Status.ALIVE and record.meta.get("sync"):
            self.holders.add(name)
        self.live += int(record.status.live)
        if record.status is Status.SUSPECT:
            current = self._suspicions.get(name)
            if new_life or current is None or current.incarnation != record.incarnation:
                self._suspicions[name] = Suspicion.start(
                    self._config, now, self.live, record.incarnation, record.by)
        else:
            self._suspicions.pop(name, None)

    def with_status(self, *statuses: Status) -> list[MemberRecord]:
        return [self._records[n] for s in statuses for n in self.by_status[s].names]

    def sample(self, rng: random.Random, k: int, *statuses: Status,
               extra: Sequence[str] = ()) -> list[MemberRecord]:
        """Up to ``k`` distinct records in these statuses (or named in ``extra``), in O(k)."""
        groups = [self.by_status[s].names for s in statuses] + [list(extra)]
        total = sum(len(g) for g in groups)
        out = []
        for i in rng.sample(range(total), min(k, total)):
            for group in groups:
                if i < len(group):
                    out.append(self._records[group[i]])
                    break
                i -= len(group)
        return out

    def hosted_by(self, host: str) -> list[MemberRecord]:
        """The members ``host`` speaks for, in any status."""
        names = self.hosted.get(host)
        return [] if names is None else [self._records[n] for n in names.names]

    def probe_targets(self) -> list[str]:
        """Members alive or suspect that answer probes (hosted ones do not)."""
        return [*self.by_status[Status.ALIVE].names, *self.by_status[Status.SUSPECT].names]

    def is_live(self, name: str) -> bool:
        """Whether ``name`` is alive or suspect and answers probes itself."""
        record = self._records.get(name)
        return record is not None and record.status.live and not record.host
