"""What the dashboard reads in-process: the broker's own view of the cluster.

Workers, machines, apps and releases are rows of the registry view the broker
already holds (its ``Catalog``); statuses and suspicions come from its
membership. Reading them costs no request to anyone, so a screen shows
what this broker places on. Anything that needs a worker (a machine's
events, its placement record) or changes something goes through the public
API instead (``calls.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from bodega.broker.auth.tokens import Principal
from bodega.broker.ui.apps_view import (
    AppSummary,
    IpRow,
    ReleaseRow,
    app_summary,
    ip_rows,
    release_rows,
)
from bodega.broker.ui.members_view import MemberRow, member_rows
from bodega.broker.ui.rows import MachineSlice, WorkerView, machine_slice, natural, worker_view
from bodega.broker.view.catalog import Catalog


def no_suspicion(_name: str) -> float | None:
    return None


class ClusterView:
    def __init__(self, catalog: Catalog,
                 suspicion_left: Callable[[str], float | None] = no_suspicion) -> None:
        self.catalog = catalog
        self.suspicion_left = suspicion_left

    def workers(self, region: str | None = None) -> list[WorkerView]:
        docs = self.catalog.rows("workers", region=region) if region else \
            self.catalog.rows("workers")
        found = (worker_view(d, self.catalog.member_status(str(d.get("name", "")))) for d in docs)
        return sorted((w for w in found if w is not None), key=lambda w: natural(w.name))

    def worker(self, name: str) -> WorkerView | None:
        doc = self.catalog.get("workers", name)
        return None if doc is None else worker_view(doc, self.catalog.member_status(name))

    def regions(self) -> list[str]:
        return sorted({w.region for w in self.workers()})

    def machines(self, **filters: str) -> list[MachineSlice]:
        """Machines of the view (destroyed ones too: callers choose), by ``filters``."""
        found = (machine_slice(d) for d in self.catalog.rows("machines", **filters))
        return [m for m in found if m is not None]

    def machine(self, machine_id: str) -> MachineSlice | None:
        doc = self.catalog.get("machines", machine_id)
        return None if doc is None else machine_slice(doc)

    def app(self, name: str) -> AppSummary | None:
        doc = self.catalog.get("apps", name)
        if doc is None:
            return None
        return app_summary(name, str(doc.get("org_slug", "personal")),
                           str(doc.get("network", "default")), self.machines(app=name))

    def apps(self, who: Principal) -> list[AppSummary]:
        names = sorted(str(d["name"]) for d in self.catalog.rows("apps")
                       if d.get("name") and who.can(str(d["name"])))
        return [a for n in names if (a := self.app(n)) is not None]

    def ips(self, app: str) -> list[IpRow]:
        return ip_rows(self.catalog.rows("ip_assignments", app=app))

    def releases(self, app: str) -> list[ReleaseRow]:
        return release_rows(self.catalog.rows("releases", app=app))

    def members(self) -> list[MemberRow]:
        return member_rows((m.model_dump() for m in self.catalog.members()), self.suspicion_left)
