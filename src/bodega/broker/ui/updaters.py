"""What each page's stream re-renders when the view changes (see ``stream.py``).

The topology sends only what a change touched: the card of each affected
worker shown on the page, and the totals (and strip) of its region; a worker
that appears or leaves a page re-renders the whole screen. The other screens
are small: they re-render their one fragment.
"""

from __future__ import annotations

from bodega.broker.ui.core.topology import region_view
from bodega.broker.ui.gatekeeper import Visitor
from bodega.broker.ui.parts import Parts
from bodega.broker.ui.screens import (
    app_screen,
    machine_screen,
    members_screen,
    placements_screen,
    topology_screen,
    worker_screen,
)
from bodega.broker.ui.stream import EVERYTHING, Event
from bodega.broker.view.catalog import Change
from bodega.model.errors import BodegaError

TABLES = ("workers", "machines", "members")


class TopologyUpdater:
    def __init__(self, parts: Parts, focus: str, page: int) -> None:
        self.parts = parts
        self.focus = focus
        self.page = page
        self.shown: dict[str, set[str]] = {}  # region -> names of the cards on the page
        self.region_of: dict[str, str] = {}  # worker -> region
        self.worker_of: dict[str, str] = {}  # machine -> worker

    def wants(self, change: Change) -> bool:
        return change.table in TABLES

    def _worker_touched(self, change: Change) -> str | None:
        if change.table in ("workers", "members"):
            return change.key
        machine = self.parts.view.machine(change.key)
        if machine is not None:
            self.worker_of[change.key] = machine.worker
            return machine.worker
        return self.worker_of.pop(change.key, None)

    async def render(self, changes: list[Change]) -> list[Event]:
        if EVERYTHING in changes:
            return [self._everything()]
        touched = {w for c in changes if (w := self._worker_touched(c)) is not None}
        regions = set()
        for name in touched:
            region = self.region_of.get(name)
            if region is None:
                worker = self.parts.view.worker(name)
                if worker is None:
                    continue  # a member that is not a worker (a broker, a proxy)
                return [self._everything()]  # a worker the page has not drawn yet
            regions.add(region)
        t = self.parts.templates
        events: list[Event] = []
        for region in sorted(regions):
            view = self.parts.view
            shown = region_view(region, view.workers(region), view.machines(region=region),
                                self.page if region == self.focus else 1)
            if {c.worker.name for c in shown.cards} != self.shown.get(region):
                return [self._everything()]
            events.append((f"totals-{shown.key}",
                           t.fragment("_region_totals.html", region=shown)))
            if shown.strip:
                events.append((f"strip-{shown.key}",
                               t.fragment("_strip.html", region=shown)))
            events += [(f"worker-{card.worker.key}", t.fragment("_worker_card.html", card=card))
                       for card in shown.cards if card.worker.name in touched]
        return events

    def _everything(self) -> Event:
        screen = topology_screen(self.parts.view, self.focus, self.page)
        self.shown = {r.region: {c.worker.name for c in r.cards} for r in screen.regions}
        self.region_of = {c.worker.name: r.region for r in screen.regions for c in r.cards}
        for r in screen.regions:  # workers off the page still belong to their region
            for cell in r.strip:
                self.region_of[cell.name] = r.region
        return "topology", self.parts.templates.fragment("_topology.html", screen=screen)


class WorkerUpdater:
    def __init__(self, parts: Parts, name: str) -> None:
        self.parts = parts
        self.name = name

    def wants(self, change: Change) -> bool:
        if change.table in ("workers", "members"):
            return change.key == self.name
        if change.table != "machines":
            return False
        machine = self.parts.view.machine(change.key)
        return machine is None or machine.worker == self.name  # gone: it may have been here

    async def render(self, changes: list[Change]) -> list[Event]:
        try:
            screen = worker_screen(self.parts.view, self.name)
        except BodegaError as exc:
            return [("worker", self.parts.templates.fragment("_flash.html", ok=False,
                                                             text=exc.message))]
        return [("worker", self.parts.templates.fragment("_worker_body.html", screen=screen))]


class AppsUpdater:
    def __init__(self, parts: Parts, visitor: Visitor, app: str | None = None) -> None:
        self.parts = parts
        self.visitor = visitor
        self.app = app  # None: the list of apps

    def wants(self, change: Change) -> bool:
        if change.table != "machines":
            return False
        if self.app is None:
            return True
        machine = self.parts.view.machine(change.key)
        return machine is None or machine.app == self.app

    async def render(self, changes: list[Change]) -> list[Event]:
        t = self.parts.templates
        if self.app is None:
            return [("apps", t.fragment("_apps_table.html",
                                        apps=self.parts.view.apps(self.visitor.principal)))]
        try:
            screen = app_screen(self.parts.view, self.visitor.principal, self.app)
        except BodegaError as exc:
            return [("app", t.fragment("_flash.html", ok=False, text=exc.message))]
        return [("app", t.fragment("_app_body.html", screen=screen))]


class MachineUpdater:
    def __init__(self, parts: Parts, visitor: Visitor, app: str, machine_id: str) -> None:
        self.parts = parts
        self.visitor = visitor
        self.app = app
        self.machine_id = machine_id

    def wants(self, change: Change) -> bool:
        return change.table == "machines" and change.key == self.machine_id

    async def render(self, changes: list[Change]) -> list[Event]:
        t = self.parts.templates
        try:
            screen = await machine_screen(self.parts, self.visitor, self.app, self.machine_id)
        except BodegaError as exc:
            return [("machine", t.fragment("_flash.html", ok=False, text=exc.message))]
        return [("machine", t.fragment("_machine_state.html", detail=screen.detail,
                                       visitor=self.visitor)),
                ("events", t.fragment("_machine_events.html", detail=screen.detail))]


class PlacementsUpdater:
    def __init__(self, parts: Parts) -> None:
        self.parts = parts

    def wants(self, change: Change) -> bool:
        return False  # refusals arrive through their own listener, as EVERYTHING

    async def render(self, changes: list[Change]) -> list[Event]:
        return [("refusals", self.parts.templates.fragment(
            "_refusals.html", screen=placements_screen(self.parts)))]


class MembersUpdater:
    def __init__(self, parts: Parts) -> None:
        self.parts = parts

    def wants(self, change: Change) -> bool:
        return change.table == "members"

    async def render(self, changes: list[Change]) -> list[Event]:
        return [("members", self.parts.templates.fragment(
            "_members_table.html", screen=members_screen(self.parts.view)))]
