"""Whose series a PromQL query sees: the org filter the broker adds, never the caller's
(pure)."""

from __future__ import annotations

import pytest

from bodega.broker.prometheus.core.scope import Caller, forwarded, org_filter, store_path
from bodega.model.errors import BadRequest, NotFound


def test_an_app_token_sees_its_apps_org_only() -> None:
    mine = Caller(admin=False, app="web", app_org="acme")
    assert org_filter(mine, "acme") == [("extra_label", "org=acme")]
    with pytest.raises(NotFound, match="org not found: personal"):
        org_filter(mine, "personal")
    with pytest.raises(NotFound):  # an app gone from the view: no org at all
        org_filter(Caller(admin=False, app="gone", app_org=None), "acme")


def test_an_admin_sees_any_org_and_the_clusters_own_series() -> None:
    assert org_filter(Caller(admin=True), "personal") == [
        ("extra_filters[]", '{org="personal"}'), ("extra_filters[]", '{org=""}')]


def test_the_callers_own_filters_are_dropped_before_the_orgs_is_added() -> None:
    sent = forwarded([("query", "up"), ("extra_label", "org=other"),
                      ("extra_filters[]", '{org=~".+"}'), ("extra_filters", "{}"),
                      ("time", "1")],
                     Caller(admin=False, app="web", app_org="acme"), "acme")
    assert sent == [("query", "up"), ("time", "1"), ("extra_label", "org=acme")]


def test_a_name_no_org_has_and_an_unknown_endpoint_are_refused() -> None:
    with pytest.raises(BadRequest):
        org_filter(Caller(admin=True), 'a"}or{x="')
    with pytest.raises(BadRequest):
        store_path("write")
    with pytest.raises(BadRequest):
        store_path("", 'bad"label')
    assert store_path("query_range") == "/api/v1/query_range"
    assert store_path("", "__name__") == "/api/v1/label/__name__/values"
