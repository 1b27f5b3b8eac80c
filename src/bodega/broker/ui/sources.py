"""What the dashboard reads in-process: the broker's own view of the cluster.

Workers, machines, apps and releases are rows of the registry view the broker
already holds (its ``Catalog``); statuses and suspicions come from its
membership. Reading them costs no request to anyone, so a screen shows
what this broker places on. Anything that needs a worker (a machine's
events, its placement record) or changes something goes through the public
API instead (``calls.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bodega.broker.auth.tokens import Principal
from bodega.broker.ui.core.apps_view import (
    AppSummary,
    IpRow,
    ReleaseRow,
    app_summary,
    ip_rows,
    release_rows,
)
from bodega.broker.ui.core.members_view import MemberRow, member_rows
from bodega.broker.ui.core.rows import MachineSlice, WorkerView, machine_slice, natural, worker_view
from bodega.broker.view.catalog import Catalog
from bodega.broker.view.core.host_status import host_status, listed_members
from bodega.model.rows import AppRow, IpAssignmentRow, WorkerRow
from bodega.wire.public.releases import Release


def no_suspicion(_name: str) -> float | None:
    return None


class ClusterView:
    def __init__(self, catalog: Catalog,
                 suspicion_left: Callable[[str], float | None] = no_suspicion) -> None:
        self.catalog = catalog
        self.suspicion_left = suspicion_left

    def workers(self, region: str | None = None) -> list[WorkerView]:
        rows = self.catalog.rows(WorkerRow, region=region) if region else \
            self.catalog.rows(WorkerRow)
        return sorted((worker_view(r, self.catalog.member_status(r.name)) for r in rows),
                      key=lambda w: natural(w.name))

    def worker(self, name: str) -> WorkerView | None:
        row = self.catalog.get(WorkerRow, name)
        return None if row is None else worker_view(row, self.catalog.member_status(name))

    def regions(self) -> list[str]:
        return sorted({w.region for w in self.workers()})

    def machines(self, **filters: str) -> list[MachineSlice]:
        """Machines of the view (destroyed ones too: callers choose), by ``filters``, each
        with its host's status as the API answers it."""
        found = (self._slice(d) for d in self.catalog.rows("machines", **filters))
        return [m for m in found if m is not None]

    def machine(self, machine_id: str) -> MachineSlice | None:
        doc = self.catalog.get("machines", machine_id)
        return None if doc is None else self._slice(doc)

    def _slice(self, doc: Mapping[str, Any]) -> MachineSlice | None:
        return machine_slice(doc, host_status(self.catalog.member_status(
            str(doc.get("worker") or ""))))

    def app(self, name: str) -> AppSummary | None:
        row = self.catalog.get(AppRow, name)
        if row is None:
            return None
        return app_summary(name, row.org_slug, row.network, self.machines(app=name))

    def apps(self, who: Principal) -> list[AppSummary]:
        names = sorted(r.name for r in self.catalog.rows(AppRow) if r.name and who.can(r.name))
        return [a for n in names if (a := self.app(n)) is not None]

    def ips(self, app: str) -> list[IpRow]:
        return ip_rows(self.catalog.rows(IpAssignmentRow, app=app))

    def releases(self, app: str) -> list[ReleaseRow]:
        return release_rows(self.catalog.rows(Release, app=app))

    def members(self) -> list[MemberRow]:
        """Membership's members, and the workers it has no record of whose rows remain."""
        listed = listed_members(self.catalog.members(), self.catalog.rows(WorkerRow))
        return member_rows((m.model_dump() for m in listed), self.suspicion_left)
