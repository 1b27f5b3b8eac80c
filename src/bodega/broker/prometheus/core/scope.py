"""Whose series a PromQL query sees, and which query parameters carry it; pure.

A query names its org in the path (``/prometheus/<org>/api/v1/...``, Fly's shape).
An app token sees its app's org only (another org: 404, as an app not its own); an
admin token any org. The filter is VictoriaMetrics' own, added to the query's
parameters by the broker, never the caller's: ``extra_label=org=<org>`` (every
selector of the query gets ``org="<org>"``), and for an admin also the cluster's own
series (those with no ``org``: its daemons', ``up`` of each), as
``extra_filters[]`` (VictoriaMetrics ORs these). Any ``extra_label`` or
``extra_filters`` the caller sent is dropped first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bodega.model.errors import BadRequest, NotFound

OWN = frozenset({"extra_label", "extra_filters", "extra_filters[]"})
ORG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
ENDPOINTS = ("query", "query_range", "series", "labels")  # and label/<name>/values
STORE_PATHS = frozenset(f"/api/v1/{e}" for e in ENDPOINTS)
LABEL_VALUES = re.compile(r"^/api/v1/label/[a-zA-Z_][a-zA-Z0-9_]*/values$")


@dataclass(frozen=True)
class Caller:
    """Who asks: an admin, or a token for one app (its org, None: no such app now)."""

    admin: bool
    app: str | None = None
    app_org: str | None = None


def org_filter(caller: Caller, org: str) -> list[tuple[str, str]]:
    """The parameters that keep the query to ``org`` (and, for an admin, the cluster's own
    series); 404 when the caller may not see ``org``, 400 for a name no org has."""
    if not ORG_NAME.match(org):
        raise BadRequest(f"invalid_argument: {org[:64]!r} is not an org name")
    if not caller.admin and caller.app_org != org:
        raise NotFound(f"org not found: {org}")
    if caller.admin:
        return [("extra_filters[]", f'{{org="{org}"}}'), ("extra_filters[]", '{org=""}')]
    return [("extra_label", f"org={org}")]


def forwarded(params: Iterable[tuple[str, str]], caller: Caller, org: str
              ) -> list[tuple[str, str]]:
    """The caller's parameters, less any filter of its own, and the org's filter."""
    return [(k, v) for k, v in params if k not in OWN] + org_filter(caller, org)


def store_path(endpoint: str, label: str | None = None) -> str:
    """The store's path for one of the API's endpoints (400 for another)."""
    if label is not None:
        path = f"/api/v1/label/{label}/values"
        if not LABEL_VALUES.match(path):
            raise BadRequest(f"invalid_argument: {label[:64]!r} is not a label name")
        return path
    if endpoint not in ENDPOINTS:
        raise BadRequest(f"invalid_argument: no endpoint {endpoint!r}")
    return f"/api/v1/{endpoint}"
