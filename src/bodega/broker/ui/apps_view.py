"""The apps screens' content: each app's machines by process group and region, its releases.

Releases are the view's shared rows a deploy writes (``broker/apps/releases.py``);
the one ``bodega rollback`` would go back to is the newest complete release
older than the newest one (``cli/deploy.py``'s ``pick_release`` without a
version: the same rule, here for the screen). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bodega.broker.ui.rows import MachineSlice, natural
from bodega.model.rows import IpAssignmentRow


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


def rollback_version(releases: Iterable[Mapping[str, Any]]) -> int | None:
    """The newest complete release older than the newest release; None if there is none."""
    found = [(int(r["version"]), str(r.get("status", ""))) for r in releases if "version" in r]
    newest = max((v for v, _ in found), default=0)
    earlier = [v for v, status in found if status == "complete" and v < newest]
    return max(earlier, default=None)


def release_rows(releases: Iterable[Mapping[str, Any]]) -> list[ReleaseRow]:
    """Newest first, the current and the roll-back target marked."""
    docs = [r for r in releases if "version" in r]
    target = rollback_version(docs)
    newest = max((int(r["version"]) for r in docs), default=0)
    rows = [ReleaseRow(version=int(r["version"]), status=str(r.get("status", "")),
                       strategy=str(r.get("strategy", "")), image=str(r.get("image", "")),
                       user=str(r.get("user", "")), description=str(r.get("description") or ""),
                       created_at=str(r.get("created_at", "")),
                       failure=str(r.get("failure") or ""),
                       current=int(r["version"]) == newest,
                       rollback_target=int(r["version"]) == target) for r in docs]
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
