"""The ``apps`` row: an app's name, org and private network, written by any broker (last
writer wins) and read by brokers (the API, tokens, certificates, the dashboard) and by
workers (the private network's fence and names)."""

from __future__ import annotations

from typing import ClassVar

from bodega.model.rows.row import Row


class AppRow(Row):
    """An app's row in the view: its name and org, nothing else to agree on."""

    TABLE: ClassVar[str] = "apps"

    id: str = ""
    name: str
    org_slug: str = "personal"
    network: str = "default"
    created_at: float = 0.0
