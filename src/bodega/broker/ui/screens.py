"""Each screen's content, gathered from the view (and for a machine, the API): what a page
and its live updates both render."""

from __future__ import annotations

from dataclasses import dataclass

from bodega.broker.auth.tokens import Principal
from bodega.broker.ui.core.apps_view import AppSummary, IpRow, MachineGroup, ReleaseRow
from bodega.broker.ui.core.apps_view import group_machines as by_group
from bodega.broker.ui.core.machine_view import (
    MachineDetail,
    PlacementView,
    machine_detail,
    placement_view,
)
from bodega.broker.ui.core.members_view import MemberRow, status_counts
from bodega.broker.ui.core.refusals import ReasonGroup, Refusal, group_by_reason
from bodega.broker.ui.core.rows import MachineSlice, natural
from bodega.broker.ui.core.topology import RegionView, WorkerCard, topology, worker_card
from bodega.broker.ui.gatekeeper import Visitor
from bodega.broker.ui.parts import Parts
from bodega.broker.ui.sources import ClusterView
from bodega.model.errors import NotFound
from bodega.wire.public.placement import PlacementRecord

RECENT_SHOWN = 20


@dataclass(frozen=True)
class TopologyScreen:
    regions: list[RegionView]
    focus: str  # the region whose page was asked for ("": none)
    page: int


def topology_screen(view: ClusterView, focus: str = "", page: int = 1) -> TopologyScreen:
    pages = {focus: page} if focus else {}
    return TopologyScreen(topology(view.workers(), view.machines(), pages), focus, page)


@dataclass(frozen=True)
class WorkerScreen:
    card: WorkerCard
    machines: tuple[MachineSlice, ...]  # every machine on it, resting ones too


def worker_screen(view: ClusterView, name: str) -> WorkerScreen:
    worker = view.worker(name)
    if worker is None:
        raise NotFound(f"worker not found: {name}")
    machines = [m for m in view.machines(worker=name) if m.state != "destroyed"]
    return WorkerScreen(worker_card(worker, machines),
                        tuple(sorted(machines, key=lambda m: (m.app, natural(m.name)))))


@dataclass(frozen=True)
class AppScreen:
    summary: AppSummary
    groups: list[MachineGroup]
    releases: list[ReleaseRow]
    ips: list[IpRow]


def app_screen(view: ClusterView, who: Principal, app: str) -> AppScreen:
    who.check(app)  # another app's is "not found", as the API answers
    summary = view.app(app)
    if summary is None:
        raise NotFound(f"app not found: {app}")
    return AppScreen(summary, by_group(view.machines(app=app)), view.releases(app),
                     view.ips(app))


@dataclass(frozen=True)
class MachineScreen:
    detail: MachineDetail
    placement: PlacementView | None


async def machine_screen(parts: Parts, visitor: Visitor, app: str,
                         machine_id: str) -> MachineScreen:
    """From the API, with the visitor's token: the machine (its events too) and its record."""
    api = parts.api.of(visitor.token)
    machine = await api.machine(app, machine_id)
    known = parts.view.machine(machine_id)
    try:
        record: PlacementRecord | None = await api.placement(app, machine_id)
    except NotFound:  # a machine made before records were kept has none
        record = None
    return MachineScreen(machine_detail(app, machine, known.worker if known else ""),
                         None if record is None else placement_view(record))


@dataclass(frozen=True)
class PlacementsScreen:
    groups: list[ReasonGroup]
    recent: list[Refusal]
    kept: int
    regions: list[str]


def placements_screen(parts: Parts) -> PlacementsScreen:
    items = parts.refusals.items()
    return PlacementsScreen(group_by_reason(items), items[:RECENT_SHOWN], len(items),
                            parts.view.regions())


@dataclass(frozen=True)
class MembersScreen:
    members: list[MemberRow]
    counts: tuple[tuple[str, int], ...]


def members_screen(view: ClusterView) -> MembersScreen:
    rows = view.members()
    return MembersScreen(rows, status_counts(rows))
