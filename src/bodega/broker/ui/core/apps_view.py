"""The apps screens' content: each app's machines by process group and region, its releases.

Releases are the view's shared rows a deploy writes (``broker/apps/releases.py``);
the one ``bodega rollback`` would go back to is the newest complete release
older than the newest one (``cli/commands/deploy.py``'s ``pick_release`` without a
version: the same rule, here for the screen). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bodega.broker.ui.core.rows import MachineSlice, natural
from bodega.model.rows import IpAssignmentRow
from bodega.wire.public.releases import Release


@dataclass(frozen=True)
class ReleaseRow:
    version: int
    status: str  # running, complete, failed, interrupted
    strategy: str
    image: str
    user: str
    description: str
    created_at: str
    failure: str
    current: bool  # the newest release
    rollback_target: bool  # what `bodega rollback` would go back to


@dataclass(frozen=True)
class MachineGroup:
    process_group: str
    region: str
    machines: tuple[MachineSlice, ...]

    @property
    def states(self) -> tuple[tuple[str, int], ...]:
        counts: dict[str, int] = {}
        for m in self.machines:
            counts[m.state] = counts.get(m.state, 0) + 1
        return tuple(sorted(counts.items()))


@dataclass(frozen=True)
class IpRow:
    ip: str
    type: str  # v4, v6, private_v6, shared_v4
    region: str


def ip_rows(assignments: Iterable[IpAssignmentRow]) -> list[IpRow]:
    """An app's IP assignments (records for now: the proxy does not bind them yet)."""
    return sorted((IpRow(a.ip, a.type, a.region or "") for a in assignments),
                  key=lambda r: (r.type, r.ip))


@dataclass(frozen=True)
class AppSummary:
    name: str
    org: str
    network: str
    machines: int
    states: tuple[tuple[str, int], ...]
    regions: tuple[str, ...]
    failing_checks: int


def rollback_version(releases: Sequence[Release]) -> int | None:
    """The newest complete release older than the newest release; None if there is none."""
    newest = max((r.version for r in releases), default=0)
    earlier = [r.version for r in releases if r.status == "complete" and r.version < newest]
    return max(earlier, default=None)


def release_rows(releases: Sequence[Release]) -> list[ReleaseRow]:
    """Newest first, the current and the roll-back target marked."""
    target = rollback_version(releases)
    newest = max((r.version for r in releases), default=0)
    rows = [ReleaseRow(version=r.version, status=r.status, strategy=r.strategy, image=r.image,
                       user=r.user, description=r.description or "", created_at=r.created_at,
                       failure=r.failure or "", current=r.version == newest,
                       rollback_target=r.version == target) for r in releases]
    return sorted(rows, key=lambda r: -r.version)


def group_machines(machines: Iterable[MachineSlice]) -> list[MachineGroup]:
    """Machines (destroyed ones left out) by process group, then region, each by name."""
    groups: dict[tuple[str, str], list[MachineSlice]] = {}
    for m in machines:
        if m.state != "destroyed":
            groups.setdefault((m.process_group, m.region), []).append(m)
    return [MachineGroup(group, region, tuple(sorted(ms, key=lambda m: (natural(m.name), m.id))))
            for (group, region), ms in sorted(groups.items())]


def app_summary(name: str, org: str, network: str,
                machines: Sequence[MachineSlice]) -> AppSummary:
    live = [m for m in machines if m.state != "destroyed"]
    counts: dict[str, int] = {}
    for m in live:
        counts[m.state] = counts.get(m.state, 0) + 1
    return AppSummary(name=name, org=org, network=network, machines=len(live),
                      states=tuple(sorted(counts.items())),
                      regions=tuple(sorted({m.region for m in live})),
                      failing_checks=sum(1 for m in live for c in m.checks
                                         if c.status != "passing"))
