"""The ``apps`` row: an app's name, org and private network, written by any broker (last
writer wins) and read by brokers (the API, tokens, certificates, the dashboard) and by
workers (the private network's fence and names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

from bodega.model.rows.row import Row


class AppRow(Row):
    """An app's row in the view: its name and org, nothing else to agree on."""

    TABLE: ClassVar[str] = "apps"

    id: str = ""
    name: str
    org_slug: str = "personal"
    network: str = "default"
    created_at: float = 0.0


class AppsView(Protocol):
    def get(self, table: str, key: str) -> Mapping[str, Any] | None: ...


def org_reader(view: AppsView | None) -> Callable[[str], str]:
    """An app's org, from the view's ``apps`` rows (``personal`` while its row is unknown):
    the ``org`` label of its machines' series."""
    def org_of(app: str) -> str:
        doc = view.get("apps", app) if view is not None else None
        return str((doc or {}).get("org_slug") or "personal")
    return org_of
