"""Apps on the wire: the App object, its list, a deploy token, its IP assignments.

The Machines API's ``App``, ``ListAppsResponse``, ``IPAssignment`` and
``listIPAssignmentsResponse``, field for field: the broker answers them,
``MachinesClient`` reads them (``model/answer.py``: unknown fields ignored,
unset ones left out).
"""

from __future__ import annotations

from bodega.model.answer import Answer


class Organization(Answer):
    name: str = ""
    slug: str = ""
    internal_numeric_id: int | None = None


class App(Answer):
    id: str = ""
    name: str = ""
    status: str = ""  # deployed, failed or pending, as its releases tell it
    organization: Organization = Organization()
    network: str | None = None
    machine_count: int = 0
    volume_count: int = 0
    internal_numeric_id: int | None = None


class AppList(Answer):
    total_apps: int = 0
    apps: list[App] = []


class DeployToken(Answer):
    token: str


class IpAssignment(Answer):
    ip: str
    region: str | None = None
    service_name: str | None = None
    shared: bool | None = None
    created_at: str | None = None


class IpAssignmentList(Answer):
    ips: list[IpAssignment] = []
