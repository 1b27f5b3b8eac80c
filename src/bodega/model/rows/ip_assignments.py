"""The ``ip_assignments`` row: an address an app holds, keyed "<app>/<ip>", written by any
broker and read by brokers (the API, the dashboard) and workers (the Flycast addresses a
private network serves, and the names that resolve to them)."""

from __future__ import annotations

from typing import ClassVar

from bodega.model.rows.row import Row


class IpAssignmentRow(Row):
    TABLE: ClassVar[str] = "ip_assignments"

    app: str = ""
    ip: str
    type: str = ""  # v4, v6, private_v6 (Flycast in the cluster's /48), shared_v4
    region: str | None = None
    service_name: str | None = None
    shared: bool | None = None
    network: str | None = None
    created_at: str | None = None

    @property
    def key(self) -> str:
        return f"{self.app}/{self.ip}"
